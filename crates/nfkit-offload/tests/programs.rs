//! Hand-written XDP programs: paths, rules, and the model equivalence on
//! 10,000 random frames each.

mod common;

use common::{build_prog, check_program};
use nfkit_offload::rules::Fallback;
use nfkit_offload::{Outcome, RuleAction, RulesOptions, XdpAction};

const RANDOM: usize = 10_000;

fn no_maps(_: &nfkit_vm::Vm) {}

#[test]
fn ethertype_filter() {
    let img = build_prog("ethertype");
    let (a, r, eq) = check_program(
        &img,
        "ethertype",
        &no_maps,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    // clang folds "IPv6: drop" into "anything but IPv4 and ARP: drop".
    assert_eq!(r.offloaded, 1, "{:#?}", r.rules);
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("prio 3 protocol all flower skip_sw action drop")));
    assert!(a
        .paths
        .iter()
        .all(|p| matches!(p.outcome, Outcome::Action(_))));
}

#[test]
fn protocol_and_port_acl() {
    let img = build_prog("acl");
    let (a, r, eq) = check_program(&img, "acl", &no_maps, &[], RANDOM, &RulesOptions::default());
    assert!(eq.disagreements.is_empty());
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("protocol ip u32 skip_sw match u8 0x05 0x0f at 0 match u8 0x11 0xff at 9 match u16 0x0035 0xffff at 22 match u32 0x00000000 0x00000000 at 24 action drop")));
    assert!(lines
        .iter()
        .any(|l| l.contains("mirred egress redirect dev if3")));
    assert!(lines
        .iter()
        .any(|l| l.contains("ip_proto tcp dst_port 7 action mirred egress redirect dev eth0")));
    assert!(a
        .paths
        .iter()
        .any(|p| p.outcome == Outcome::Action(XdpAction::Redirect(3))));
    assert!(eq.by_rules > 1000, "{}", eq.by_rules);
    // The check is not vacuous: a wrong action is caught.
    let mut bad = r.clone();
    for x in &mut bad.rules {
        if x.action == RuleAction::Drop {
            x.action = RuleAction::Redirect(9);
        }
    }
    let vm =
        nfkit_vm::Vm::new(&img, nfkit_vm::VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let mut run = |f: &[u8]| nfkit_offload::model::run_xdp(&vm, "acl", f);
    let mut run2 = |f: &[u8]| nfkit_offload::model::run_xdp(&vm, "acl", f);
    let mut eq_bad = nfkit_offload::Equivalence::default();
    let mut rng = common::Rng(3);
    for _ in 0..2000 {
        let f = common::random_frame(&mut rng, &a);
        eq_bad.check(&bad, &f, &mut run, &mut run2);
    }
    assert!(!eq_bad.disagreements.is_empty());
    // The budget: fewer rules, the rest to software, still equivalent.
    let (_, small, eq2) = check_program(
        &img,
        "acl",
        &no_maps,
        &[],
        2000,
        &RulesOptions { max_rules: Some(3) },
    );
    // The budget counts flower rules; the guards come on top.
    assert!(small.rules.iter().filter(|r| !r.is_guard()).count() <= 3);
    assert!(small.fallbacks.iter().any(|f| f.1 == Fallback::OverBudget));
    assert!(eq2.disagreements.is_empty());
}

fn fill_blacklist(vm: &nfkit_vm::Vm) {
    let lpm = vm
        .map("src_prefixes")
        .unwrap_or_else(|| panic!("no src_prefixes"));
    let put = |plen: u32, addr: [u8; 4], v: u32| {
        let mut k = plen.to_le_bytes().to_vec();
        k.extend_from_slice(&addr);
        lpm.update(&k, &v.to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("{e:?}"));
    };
    put(8, [10, 0, 0, 0], 1);
    put(16, [10, 18, 0, 0], 2); // a hole in 10/8: passes
    put(24, [192, 168, 1, 0], 1);
    put(32, [198, 18, 0, 7], 1);
    let hash = vm
        .map("dst_block")
        .unwrap_or_else(|| panic!("no dst_block"));
    for a in [[203u8, 0, 113, 9], [198, 51, 100, 1]] {
        hash.update(&a, &1u32.to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
}

#[test]
fn prefix_blacklist_from_map_entries() {
    let img = build_prog("blacklist");
    let (_a, r, eq) = check_program(
        &img,
        "blacklist",
        &fill_blacklist,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("src_ip 10.0.0.0/8 action drop")));
    assert!(lines
        .iter()
        .any(|l| l.contains("dst_ip 203.0.113.9/32 action drop")));
    assert!(r.offloading_rules() >= 5);
}

#[test]
fn stateful_counter_goes_to_software() {
    let img = build_prog("counter");
    let (a, r, eq) = check_program(
        &img,
        "counter",
        &no_maps,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    assert!(a
        .paths
        .iter()
        .any(|p| matches!(&p.outcome, Outcome::Software(w) if w.contains("atomic"))));
    assert!(r.rules.iter().any(|x| x.action == RuleAction::Drop));
    assert!(
        r.rules.iter().all(|x| x.action != RuleAction::Drop
            || x.pattern.bits().any(|(pos, v)| pos == 23 * 8 + 1 && v)),
        "only the TCP path may drop: {:#?}",
        r.rules
    );
}

#[test]
fn tcp_flags_filter() {
    let img = build_prog("tcpflags");
    let (_a, r, eq) = check_program(
        &img,
        "tcpflags",
        &no_maps,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("tcp_flags 0x03/0x03 action drop")));
    assert!(lines.iter().any(|l| l.contains("ip_tos 0xb8/0xfc")));
}

#[test]
fn ipv6_and_fragment_bits() {
    let img = build_prog("v6frag");
    let (_a, r, eq) = check_program(
        &img,
        "v6frag",
        &no_maps,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    // Hop limit 0 is a drop in the program, but flower reads the hop
    // limit of a frame cut inside its IPv6 header as 0 too: software.
    assert!(!lines
        .iter()
        .any(|l| l.contains("ip_ttl 0/0xff action drop")));
    assert!(r.fallbacks.iter().any(|(_, f)| matches!(f,
        nfkit_offload::rules::Fallback::Inexpressible(w) if w.contains("only zero bits"))));
    assert!(lines
        .iter()
        .any(|l| l.contains("protocol ipv6 u32 skip_sw match u8 0x11 0xff at 6 match u32 0x20010db8 0xffffffff at 8 match u16 0x0035 0xffff at 42 match u32 0x00000000 0x00000000 at 44 action drop")));
    assert!(lines
        .iter()
        .any(|l| l.contains("match u16 0x0000 0x3fff at 6 match u8 0x11 0xff at 9 match u16 0x14e9 0xffff at 22 match u32 0x00000000 0x00000000 at 24 action drop")));
}

fn fill_adjacent_prefixes(vm: &nfkit_vm::Vm) {
    let lpm = vm
        .map("src_prefixes")
        .unwrap_or_else(|| panic!("no src_prefixes"));
    for i in [5u8, 0, 7, 2, 1, 6, 3, 4] {
        let mut k = 24u32.to_le_bytes().to_vec();
        k.extend_from_slice(&[10, 0, i, 0]);
        lpm.update(&k, &1u32.to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
}

#[test]
fn adjacent_prefixes_merge() {
    let img = build_prog("blacklist");
    let (_a, r, eq) = check_program(
        &img,
        "blacklist",
        &fill_adjacent_prefixes,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    assert_eq!(r.before_merge, 8);
    assert_eq!(r.after_merge, 1);
    assert!(lines
        .iter()
        .find(|l| l.contains(" flower "))
        .is_some_and(|l| l.contains("src_ip 10.0.0.0/21 action drop")));
}

#[test]
fn scratch_block_written_then_read_offloads() {
    let img = build_prog("scratch");
    let (a, r, eq) = check_program(
        &img,
        "scratch_parse",
        &no_maps,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    // The protocol went through the per-CPU block and came back: TCP
    // is dropped by a rule.
    assert!(r.offloaded >= 1, "{:#?}", a.paths);
    assert!(r.rules.iter().any(|x| x.action == RuleAction::Drop));
    assert!(eq.by_rules > 0);
}

#[test]
fn scratch_byte_from_an_earlier_packet_stays_software() {
    let img = build_prog("scratch");
    let (a, r, eq) = check_program(
        &img,
        "scratch_stale",
        &no_maps,
        &[],
        RANDOM,
        &RulesOptions::default(),
    );
    assert!(eq.disagreements.is_empty());
    assert_eq!(r.offloaded, 0, "{:#?}", r.rules);
    let why: Vec<&String> = a
        .paths
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Software(w) => Some(w),
            _ => None,
        })
        .collect();
    assert!(!why.is_empty());
    for w in why {
        assert!(
            w.contains("scratch map nfkit_pktinfo") && w.contains("did not write"),
            "{w}"
        );
    }
}

/// `bpf_redirect_map` with constant keys: slot 0's ifindex (7) becomes
/// a mirred redirect; slot 1 has no entry, so its flags' fallback
/// (XDP_DROP) is the verdict; the model agrees on every frame.
#[test]
fn devmap_redirect_with_constant_key() {
    let img = build_prog("devmap");
    let fill = |vm: &nfkit_vm::Vm| {
        vm.map("tx_ports")
            .unwrap_or_else(|| panic!("no tx_ports"))
            .update(&0u32.to_le_bytes(), &7u32.to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("{e:?}"));
    };
    let (a, r, eq) = check_program(&img, "devmap", &fill, &[], RANDOM, &RulesOptions::default());
    assert!(eq.disagreements.is_empty());
    assert!(a
        .paths
        .iter()
        .any(|p| p.outcome == Outcome::Action(XdpAction::Redirect(7))));
    let lines = r.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
    for l in &lines {
        println!("{l}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("match u8 0x11 0xff at 9 match u16 0x12b5 0xffff at 22 match u32 0x00000000 0x00000000 at 24 action mirred egress redirect dev if7")));
    // Slot 1 has no entry: the flags' fallback, XDP_DROP, decided (its
    // path checked 8 bytes of the TCP header, fewer than flower's TCP
    // keys imply, so it is not offloaded).
    assert!(a
        .paths
        .iter()
        .any(|p| p.outcome == Outcome::Action(XdpAction::Drop)
            && p.pattern.value.get(37) == Some(&179)));
    assert!(eq.by_rules > 100, "{}", eq.by_rules);
}
