//! The netlink form of the rules, without a kernel: every rule of the
//! test programs (and of the blacklist with its map entries) is encoded
//! as an `RTM_NEWTFILTER` message, serialised, parsed back by
//! netlink-packet-route and decoded; the decoded match must be the
//! rule's (less the IP version and IHL, which flower has no key for)
//! with the same port ranges, action and flags, and an unknown action
//! or key is refused.

mod common;

use common::build_prog;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::tc::{TcAttribute, TcFilterFlowerOption as F, TcMessage, TcOption};
use netlink_packet_route::RouteNetlinkMessage;
use nfkit_offload::flower::{decode, encode, SKIP_HW};
use nfkit_offload::{analyse, generate, Limits, Pattern, RuleAction, RulesOptions};
use nfkit_vm::{Vm, VmConfig};

/// A pattern without the bits flower cannot key on: the IP version
/// nibble and the IPv4 IHL.
fn keyable(p: &Pattern) -> Pattern {
    let mut q = p.clone();
    let v4 = p.mask.get(12..14) == Some(&[0xff, 0xff]) && p.value.get(12..14) == Some(&[8, 0]);
    for b in 0..8 {
        if b >= 4 || v4 {
            q.clear_bit(14 * 8 + b);
        }
    }
    q
}

/// Through the wire format and back.
fn wire(protocol: u16, options: Vec<F>) -> (u16, Vec<F>) {
    let mut m = TcMessage::with_index(7);
    m.header.info = (3 << 16) | u32::from(protocol.to_be());
    m.attributes.push(TcAttribute::Kind("flower".into()));
    m.attributes.push(TcAttribute::Options(
        options.into_iter().map(TcOption::Flower).collect(),
    ));
    let mut msg = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(RouteNetlinkMessage::NewTrafficFilter(m)),
    );
    msg.finalize();
    let mut buf = vec![0u8; msg.header.length as usize];
    msg.serialize(&mut buf);
    let back: NetlinkMessage<RouteNetlinkMessage> =
        NetlinkMessage::deserialize(&buf).unwrap_or_else(|e| panic!("{e}"));
    let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewTrafficFilter(f)) = back.payload
    else {
        panic!("not a filter");
    };
    let opts = f
        .attributes
        .iter()
        .filter_map(|a| match a {
            TcAttribute::Options(o) => Some(o.clone()),
            _ => None,
        })
        .flatten()
        .filter_map(|o| match o {
            TcOption::Flower(x) => Some(x),
            _ => None,
        })
        .collect();
    (u16::from_be((f.header.info & 0xffff) as u16), opts)
}

/// (rules, of them u32 rules) of `name`, each through the netlink form.
fn roundtrip(name: &str, setup: &dyn Fn(&Vm)) -> (usize, usize) {
    let img = build_prog(name);
    let vm = Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    setup(&vm);
    let a = analyse(&img, name, &vm, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    assert!(!rules.rules.is_empty(), "{name}: no rules");
    let mut u32_rules = 0;
    for r in &rules.rules {
        let f = encode(r, SKIP_HW, 1000).unwrap_or_else(|e| panic!("{name} prio {}: {e}", r.prio));
        if r.u32_filter {
            let u = f
                .u32_filter
                .as_ref()
                .unwrap_or_else(|| panic!("{name} prio {}: not a u32 filter", r.prio));
            assert_eq!(u.flags, SKIP_HW);
            assert_eq!(
                u.total_length,
                r.rewrite.as_ref().is_some_and(|w| w.csum_tcp),
                "{name} prio {}",
                r.prio
            );
            if r.is_guard() && r.pattern.bytes_used() <= 15 {
                // A version/IHL guard: byte 14's value and mask.
                let (t, v, m) = nfkit_offload::guard::key(r);
                assert_eq!(f.protocol, t);
                assert_eq!(u.keys, vec![(u32::from(v) << 24, u32::from(m) << 24, 0)]);
            } else {
                // A rule: its keys give back its pattern.
                let back = nfkit_offload::u32match::pattern(&u.keys, f.protocol);
                assert_eq!(
                    (back.mask.clone(), back.value.clone(), back.min_len),
                    (
                        r.pattern.mask.clone(),
                        r.pattern.value.clone(),
                        r.pattern.min_len
                    ),
                    "{name} prio {}: u32 keys",
                    r.prio
                );
                u32_rules += 1;
            }
            continue;
        }
        assert!(f.options.contains(&F::Flags(SKIP_HW)));
        let (proto, opts) = wire(f.protocol, f.options.clone());
        assert_eq!(proto, f.protocol);
        assert_eq!(
            opts, f.options,
            "{name} prio {}: options survive the wire",
            r.prio
        );
        let d =
            decode(proto, &opts, 1000).unwrap_or_else(|e| panic!("{name} prio {}: {e}", r.prio));
        let (p, ranges, act) = (d.pattern, d.ranges, d.action);
        let rw =
            |w: &Option<nfkit_offload::Rewrite>| w.as_ref().map(|w| (w.edits.clone(), w.csum_ip4h));
        assert_eq!(
            rw(&d.rewrite),
            rw(&r.rewrite),
            "{name} prio {}: rewrite",
            r.prio
        );
        let want = keyable(&r.pattern);
        assert_eq!(
            (p.mask.clone(), p.value.clone()),
            (want.mask.clone(), want.value.clone()),
            "{name} prio {}: decoded [{p}] vs rule [{}]",
            r.prio,
            r.pattern
        );
        assert_eq!(
            p.min_len,
            r.pattern.min_len.max(14),
            "{name} prio {}",
            r.prio
        );
        assert_eq!(ranges, r.ranges, "{name} prio {}", r.prio);
        assert_eq!(act, r.action, "{name} prio {}", r.prio);
    }
    (rules.rules.len(), u32_rules)
}

fn fill_blacklist(vm: &Vm) {
    let lpm = vm.map("src_prefixes").unwrap_or_else(|| panic!("no map"));
    for (plen, addr) in [
        (8u32, [10u8, 0, 0, 0]),
        (24, [192, 168, 1, 0]),
        (32, [198, 18, 0, 7]),
    ] {
        let mut k = plen.to_le_bytes().to_vec();
        k.extend_from_slice(&addr);
        lpm.update(&k, &1u32.to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    let hash = vm.map("dst_block").unwrap_or_else(|| panic!("no map"));
    hash.update(&[203, 0, 113, 9], &1u32.to_le_bytes(), 0)
        .unwrap_or_else(|e| panic!("{e:?}"));
}

#[test]
fn rules_survive_the_netlink_form() {
    let none = |_: &Vm| {};
    let all = [
        roundtrip("acl", &none),
        roundtrip("tcpflags", &none),
        roundtrip("v6frag", &none),
        roundtrip("ethertype", &none),
        roundtrip("blacklist", &fill_blacklist),
        roundtrip("tcpnat", &none),
    ];
    let n: usize = all.iter().map(|x| x.0).sum();
    let u: usize = all.iter().map(|x| x.1).sum();
    println!("{n} rules through the netlink form and back, {u} of them u32 rules");
    // The ACL's and v6frag's UDP port rules, tcpnat's checksum rule.
    assert!(all[0].1 > 0 && all[2].1 > 0 && all[5].1 > 0, "{all:?}");
}

#[test]
fn tx_is_a_redirect_to_the_device_itself() {
    let img = build_prog("acl");
    let vm = Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let a = analyse(&img, "acl", &vm, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    let mut tx = rules
        .rules
        .iter()
        .find(|r| r.action == RuleAction::Drop)
        .unwrap_or_else(|| panic!("no drop rule"))
        .clone();
    tx.action = RuleAction::Tx;
    let f = encode(&tx, 0, 9).unwrap_or_else(|e| panic!("{e}"));
    assert!(!f.options.iter().any(|o| matches!(o, F::Flags(_))));
    let act = decode(f.protocol, &f.options, 9)
        .unwrap_or_else(|e| panic!("{e}"))
        .action;
    assert_eq!(act, RuleAction::Tx);
    // Seen from another device, it is a redirect to ifindex 9.
    let act = decode(f.protocol, &f.options, 4)
        .unwrap_or_else(|e| panic!("{e}"))
        .action;
    assert_eq!(act, RuleAction::Redirect(9));
    // A key nfkit never writes is refused, not ignored.
    let mut opts = f.options.clone();
    opts.push(F::VlanId(5));
    assert!(decode(f.protocol, &opts, 9).is_err());
}

/// The model reads a header a frame lacks as zeros, as flower does: a
/// rule requiring TTL 0 or 1 matches a frame cut inside its IPv4
/// header, and the generator therefore keeps such paths in software.
#[test]
fn absent_headers_read_as_zero() {
    let mut p = Pattern::any();
    for (i, (v, m)) in [(8u8, 0xffu8), (0, 0xff)].iter().enumerate() {
        for b in 0..8 {
            if m >> b & 1 == 1 {
                p.set_bit(((12 + i) * 8) as u32 + b, v >> b & 1 == 1);
            }
        }
    }
    for b in 1..8 {
        p.set_bit(22 * 8 + b, false);
    }
    p.min_len = 34;
    let rule = nfkit_offload::Rule {
        prio: 1,
        pattern: p.clone(),
        action: RuleAction::Drop,
        paths: vec![0],
        ranges: Vec::new(),
        counts: Vec::new(),
        u32_filter: false,
        rewrite: None,
    };
    let mut cut = vec![0u8; 27];
    cut[12] = 8;
    cut[22] = 64; // TTL 64, but the IP header is incomplete
    assert!(
        rule.matches(&cut),
        "flower reads the missing IP header as zeros"
    );
    let mut whole = vec![0u8; 60];
    whole[12] = 8;
    whole[14] = 0x45;
    whole[22] = 64;
    assert!(!rule.matches(&whole));
    assert!(nfkit_offload::fields::matches_absent_header(&p).is_some());
}
