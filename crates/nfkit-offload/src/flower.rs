//! A [`Rule`] as the kernel's flower classifier takes it (the
//! `TCA_FLOWER_*` attributes of netlink-packet-route, with a `gact` or
//! `mirred` action), and back: [`encode`] for installing, [`decode`] for
//! reading installed rules and for checking the encoding.

use crate::fields;
use crate::pattern::Pattern;
use crate::pedit;
use crate::rewrite::Rewrite;
use crate::rules::{PortRange, Rule, RuleAction};
use netlink_packet_core::{DefaultNla, Emitable, Nla};
use netlink_packet_route::tc::{
    TcAction, TcActionAttribute, TcActionGeneric, TcActionMirrorOption, TcActionOption,
    TcActionType, TcFilterFlowerOption as F, TcMirror, TcMirrorActionType,
};
use std::net::{Ipv4Addr, Ipv6Addr};

/// `TCA_CLS_FLAGS_SKIP_HW`: the rule runs in software only.
pub const SKIP_HW: u32 = 1;
/// `TCA_CLS_FLAGS_SKIP_SW`: the rule runs in the NIC only.
pub const SKIP_SW: u32 = 2;
/// `ETH_P_ALL`: a filter for every EtherType.
pub const ETH_P_ALL: u16 = 0x0003;
const TCA_GACT_PARMS: u16 = 2;
const FLAG_IS_FRAGMENT: u32 = 1;
const FLAG_FIRST_FRAG: u32 = 2;

/// What flower cannot take, or an installed filter nfkit cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlowerError(pub String);

impl From<String> for FlowerError {
    fn from(s: String) -> FlowerError {
        FlowerError(s)
    }
}

impl From<&str> for FlowerError {
    fn from(s: &str) -> FlowerError {
        FlowerError(s.to_string())
    }
}

/// A decoded filter.
#[derive(Clone, Debug)]
pub struct Decoded {
    /// Its match, with the length its fields imply.
    pub pattern: Pattern,
    pub ranges: Vec<PortRange>,
    /// The terminal action.
    pub action: RuleAction,
    /// The packet count, when the dump carried one.
    pub packets: Option<u64>,
    /// The `pedit` and `csum` actions before the terminal one.
    pub rewrite: Option<Rewrite>,
}

/// A rule in flower's terms: the filter's protocol (`tcm_info`'s low
/// half) and its options.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowerRule {
    pub prio: u32,
    pub protocol: u16,
    pub options: Vec<F>,
    /// A `u32` filter instead (a guard of [`crate::guard`], or a rule
    /// of [`crate::u32match`]): `options` is then empty.
    pub u32_filter: Option<U32Filter>,
}

/// A `u32` filter's keys ([`crate::u32match::Key`]), skip flags and
/// actions.
#[derive(Clone, Debug, PartialEq)]
pub struct U32Filter {
    pub keys: Vec<crate::u32match::Key>,
    pub flags: u32,
    pub actions: Vec<TcAction>,
    /// The total-length check before the actions
    /// ([`crate::u32match::total_length_nodes`]).
    pub total_length: bool,
}

fn val_mask(p: &Pattern, r: std::ops::Range<usize>) -> Option<(Vec<u8>, Vec<u8>)> {
    let (v, m) = fields::bytes(p, r);
    m.iter().any(|&x| x != 0).then_some((v, m))
}

fn arr6(b: &[u8]) -> [u8; 6] {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[..6]);
    a
}

fn v4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

fn v6(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// The options of `rule`: its keys, `flags` ([`SKIP_HW`], [`SKIP_SW`]
/// or 0) and its action; `dev` is the ifindex of the device the rule
/// sits on (where TX sends back out). Errors name what flower cannot
/// take (the rule generator only makes rules it can).
pub fn encode(rule: &Rule, flags: u32, dev: u32) -> Result<FlowerRule, FlowerError> {
    let p = &rule.pattern;
    if rule.u32_filter {
        let protocol = fields::exact(p, 12..14)
            .map(|t| be16(&t))
            .ok_or_else(|| format!("rule prio {}: a u32 filter needs an EtherType", rule.prio))?;
        let keys = crate::u32match::keys(p).ok_or_else(|| {
            format!(
                "rule prio {}: its length ({} bytes) is not whole words past the Ethernet header",
                rule.prio, p.min_len
            )
        })?;
        return Ok(FlowerRule {
            prio: rule.prio,
            protocol,
            options: Vec::new(),
            u32_filter: Some(U32Filter {
                keys,
                flags,
                actions: actions(rule, protocol, dev)?,
                total_length: rule.rewrite.as_ref().is_some_and(|rw| rw.csum_tcp),
            }),
        });
    }
    fields::express(p)?;
    let mut o = Vec::new();
    if let Some((v, m)) = val_mask(p, 0..6) {
        o.push(F::EthDst(arr6(&v)));
        o.push(F::EthDstMask(arr6(&m)));
    }
    if let Some((v, m)) = val_mask(p, 6..12) {
        o.push(F::EthSrc(arr6(&v)));
        o.push(F::EthSrcMask(arr6(&m)));
    }
    let protocol = fields::exact(p, 12..14).map_or(ETH_P_ALL, |t| be16(&t));
    if protocol != ETH_P_ALL {
        o.push(F::EthType(protocol));
    }
    let l4 = match protocol {
        0x0800 => {
            if let Some((v, m)) = val_mask(p, 15..16) {
                o.push(F::IpTos(v[0]));
                o.push(F::IpTosMask(m[0]));
            }
            if let Some((v, m)) = val_mask(p, 22..23) {
                o.push(F::IpTtl(v[0]));
                o.push(F::IpTtlMask(m[0]));
            }
            if let Some((v, _)) = val_mask(p, 23..24) {
                o.push(F::IpProto(v[0]));
            }
            if let Some((v, m)) = val_mask(p, 20..22) {
                if be16(&v) & be16(&m) == 0 {
                    o.push(F::KeyFlags(0));
                    o.push(F::KeyFlagsMask(FLAG_IS_FRAGMENT));
                } else {
                    o.push(F::KeyFlags(FLAG_IS_FRAGMENT | FLAG_FIRST_FRAG));
                    o.push(F::KeyFlagsMask(FLAG_IS_FRAGMENT | FLAG_FIRST_FRAG));
                }
            }
            if let Some((v, m)) = val_mask(p, 26..30) {
                o.push(F::Ipv4Src(v4(&v)));
                o.push(F::Ipv4SrcMask(v4(&m)));
            }
            if let Some((v, m)) = val_mask(p, 30..34) {
                o.push(F::Ipv4Dst(v4(&v)));
                o.push(F::Ipv4DstMask(v4(&m)));
            }
            34
        }
        0x86dd => {
            let (v14, m14) = fields::bytes(p, 14..16);
            let (tv, tm) = (
                (v14[0] & 0x0f) << 4 | v14[1] >> 4,
                (m14[0] & 0x0f) << 4 | m14[1] >> 4,
            );
            if tm != 0 {
                o.push(F::IpTos(tv));
                o.push(F::IpTosMask(tm));
            }
            if let Some((v, _)) = val_mask(p, 20..21) {
                o.push(F::IpProto(v[0]));
            }
            if let Some((v, m)) = val_mask(p, 21..22) {
                o.push(F::IpTtl(v[0]));
                o.push(F::IpTtlMask(m[0]));
            }
            if let Some((v, m)) = val_mask(p, 22..38) {
                o.push(F::Ipv6Src(v6(&v)));
                o.push(F::Ipv6SrcMask(v6(&m)));
            }
            if let Some((v, m)) = val_mask(p, 38..54) {
                o.push(F::Ipv6Dst(v6(&v)));
                o.push(F::Ipv6DstMask(v6(&m)));
            }
            54
        }
        _ => 14,
    };
    let proto = fields::l4_proto(p).map(|x| x.1);
    if let Some((v, m)) = val_mask(p, l4..l4 + 2) {
        let (a, b) = (be16(&v), be16(&m));
        o.extend(match proto {
            Some(6) => [F::TcpSrc(a), F::TcpSrcMask(b)],
            _ => [F::UdpSrc(a), F::UdpSrcMask(b)],
        });
    }
    if let Some((v, m)) = val_mask(p, l4 + 2..l4 + 4) {
        let (a, b) = (be16(&v), be16(&m));
        o.extend(match proto {
            Some(6) => [F::TcpDst(a), F::TcpDstMask(b)],
            _ => [F::UdpDst(a), F::UdpDstMask(b)],
        });
    }
    if let Some((v, m)) = val_mask(p, l4 + 13..l4 + 14) {
        o.push(F::TcpFlags(u16::from(v[0])));
        o.push(F::TcpFlagsMask(u16::from(m[0])));
    }
    for r in &rule.ranges {
        if r.at == l4 {
            o.push(F::PortSrcMin(r.lo));
            o.push(F::PortSrcMax(r.hi));
        } else if r.at == l4 + 2 {
            o.push(F::PortDstMin(r.lo));
            o.push(F::PortDstMax(r.hi));
        } else {
            return Err(format!("a port range at byte {} (not a port)", r.at).into());
        }
    }
    if flags != 0 {
        o.push(F::Flags(flags));
    }
    o.push(F::Actions(actions(rule, protocol, dev)?));
    Ok(FlowerRule {
        prio: rule.prio,
        protocol,
        options: o,
        u32_filter: None,
    })
}

/// The rewrite's pedit and csum (`pipe`), then the terminal action.
fn actions(rule: &Rule, protocol: u16, dev: u32) -> Result<Vec<TcAction>, FlowerError> {
    let mut acts = match &rule.rewrite {
        Some(rw) => pedit::actions(rw, protocol, 1)
            .map_err(|e| format!("rule prio {}: its header rewrite ({rw}): {e}", rule.prio))?,
        None => Vec::new(),
    };
    let mut last = action(rule.action, dev);
    last.tab = acts.len() as u16 + 1;
    acts.push(last);
    Ok(acts)
}

fn action(a: RuleAction, dev: u32) -> TcAction {
    let gact = |t: TcActionType| {
        let mut g = TcActionGeneric::default();
        g.action = t;
        let mut buf = vec![0u8; g.buffer_len()];
        g.emit(&mut buf);
        vec![
            TcActionAttribute::Kind("gact".into()),
            TcActionAttribute::Options(vec![TcActionOption::Other(DefaultNla::new(
                TCA_GACT_PARMS,
                buf,
            ))]),
        ]
    };
    let mirred = |ifindex: u32| {
        let mut generic = TcActionGeneric::default();
        generic.action = TcActionType::Stolen;
        let mut m = TcMirror::default();
        m.generic = generic;
        m.eaction = TcMirrorActionType::EgressRedir;
        m.ifindex = ifindex;
        vec![
            TcActionAttribute::Kind("mirred".into()),
            TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(
                m,
            ))]),
        ]
    };
    let attributes = match a {
        RuleAction::Drop => gact(TcActionType::Shot),
        RuleAction::Pass => gact(TcActionType::Ok),
        RuleAction::Tx => mirred(dev),
        RuleAction::Redirect(i) => mirred(i),
    };
    let mut act = TcAction::default();
    act.tab = 1;
    act.attributes = attributes;
    act
}

fn put(p: &mut Pattern, at: usize, v: &[u8], m: &[u8]) {
    for (i, (&v, &m)) in v.iter().zip(m).enumerate() {
        for b in 0..8 {
            if m >> b & 1 == 1 {
                p.set_bit(((at + i) * 8) as u32 + b, v >> b & 1 == 1);
            }
        }
    }
}

/// What an installed flower filter matches and does: the pattern (with
/// the length its fields imply), port ranges, action (`dev`: the
/// device it sits on, so a redirect back out of it is TX), and its
/// packet count when the dump carried one. Options nfkit never writes
/// are an error naming them. Flower has no key for the IP version and
/// IHL (byte 14 of IPv4): the pattern leaves them open.
pub fn decode(protocol: u16, options: &[F], dev: u32) -> Result<Decoded, FlowerError> {
    let mut p = Pattern::any();
    if protocol != ETH_P_ALL {
        put(&mut p, 12, &protocol.to_be_bytes(), &[0xff, 0xff]);
    }
    let v6p = protocol == 0x86dd;
    let l4 = if v6p { 54 } else { 34 };
    let find = |want: fn(&F) -> Option<Vec<u8>>| options.iter().find_map(want);
    let pair = |p: &mut Pattern, at: usize, v: Option<Vec<u8>>, m: Option<Vec<u8>>| {
        if let (Some(v), Some(m)) = (v, m) {
            put(p, at, &v, &m);
        }
    };
    pair(
        &mut p,
        0,
        find(|o| match o {
            F::EthDst(a) => Some(a.to_vec()),
            _ => None,
        }),
        find(|o| match o {
            F::EthDstMask(a) => Some(a.to_vec()),
            _ => None,
        }),
    );
    pair(
        &mut p,
        6,
        find(|o| match o {
            F::EthSrc(a) => Some(a.to_vec()),
            _ => None,
        }),
        find(|o| match o {
            F::EthSrcMask(a) => Some(a.to_vec()),
            _ => None,
        }),
    );
    let mut ranges = Vec::new();
    let mut act = None;
    let mut packets = None;
    let mut keys: Vec<pedit::Key> = Vec::new();
    let mut csum_ip4h = false;
    let mut csum_tcp = false;
    let (mut tos, mut ttl, mut flags) = ((0u8, 0u8), (0u8, 0u8), (None, None));
    let mut proto = None;
    for o in options {
        match o {
            F::EthDst(_) | F::EthDstMask(_) | F::EthSrc(_) | F::EthSrcMask(_) => {}
            F::EthType(t) if *t == protocol => {}
            F::IpProto(x) => proto = Some(*x),
            F::IpTos(x) => tos.0 = *x,
            F::IpTosMask(x) => tos.1 = *x,
            F::IpTtl(x) => ttl.0 = *x,
            F::IpTtlMask(x) => ttl.1 = *x,
            F::KeyFlags(x) => flags.0 = Some(*x),
            F::KeyFlagsMask(x) => flags.1 = Some(*x),
            F::Ipv4Src(a) => put(&mut p, 26, &a.octets(), &[0; 4]),
            F::Ipv4SrcMask(m) => put(&mut p, 26, &src4(options), &m.octets()),
            F::Ipv4Dst(_) => {}
            F::Ipv4DstMask(m) => put(&mut p, 30, &dst4(options), &m.octets()),
            F::Ipv6Src(_) | F::Ipv6Dst(_) => {}
            F::Ipv6SrcMask(m) => put(&mut p, 22, &addr6(options, true), &m.octets()),
            F::Ipv6DstMask(m) => put(&mut p, 38, &addr6(options, false), &m.octets()),
            F::TcpSrc(_) | F::UdpSrc(_) | F::TcpDst(_) | F::UdpDst(_) => {}
            F::TcpSrcMask(m) | F::UdpSrcMask(m) => put(
                &mut p,
                l4,
                &port(options, true).to_be_bytes(),
                &m.to_be_bytes(),
            ),
            F::TcpDstMask(m) | F::UdpDstMask(m) => put(
                &mut p,
                l4 + 2,
                &port(options, false).to_be_bytes(),
                &m.to_be_bytes(),
            ),
            F::TcpFlags(_) => {}
            F::TcpFlagsMask(m) => {
                let v = options
                    .iter()
                    .find_map(|o| match o {
                        F::TcpFlags(v) => Some(*v),
                        _ => None,
                    })
                    .unwrap_or(0);
                put(&mut p, l4 + 13, &[v as u8], &[*m as u8]);
            }
            F::PortSrcMin(lo) | F::PortDstMin(lo) => {
                let src = matches!(o, F::PortSrcMin(_));
                let hi = options.iter().find_map(|x| match (x, src) {
                    (F::PortSrcMax(h), true) | (F::PortDstMax(h), false) => Some(*h),
                    _ => None,
                });
                ranges.push(PortRange {
                    at: if src { l4 } else { l4 + 2 },
                    lo: *lo,
                    hi: hi.unwrap_or(*lo),
                });
            }
            F::PortSrcMax(_) | F::PortDstMax(_) => {}
            F::Flags(_) | F::InHwCount(_) | F::ClassId(_) => {}
            F::Actions(acts) => {
                for a in acts {
                    match decode_action(a, dev)? {
                        Act::Pedit(k) => keys.extend(k),
                        Act::Csum(ip, tcp) => {
                            csum_ip4h |= ip;
                            csum_tcp |= tcp;
                        }
                        Act::Last(x) => act = Some(x),
                    }
                    packets = packets.or_else(|| action_packets(a));
                }
            }
            other => return Err(format!("flower option nfkit does not write: {other:?}").into()),
        }
    }
    if let Some(x) = proto {
        put(&mut p, if v6p { 20 } else { 23 }, &[x], &[0xff]);
    }
    if v6p {
        let (v, m) = ((tos.0 >> 4, tos.0 << 4), (tos.1 >> 4, tos.1 << 4));
        put(&mut p, 14, &[v.0, v.1], &[m.0, m.1]);
        put(&mut p, 21, &[ttl.0], &[ttl.1]);
    } else {
        put(&mut p, 15, &[tos.0], &[tos.1]);
        put(&mut p, 22, &[ttl.0], &[ttl.1]);
        if let (Some(f), Some(m)) = flags {
            if m & FLAG_IS_FRAGMENT != 0 {
                let v: u16 = if f & FLAG_IS_FRAGMENT == 0 { 0 } else { 0x2000 };
                put(&mut p, 20, &v.to_be_bytes(), &0x3fffu16.to_be_bytes());
            }
        }
    }
    let act = act.ok_or("a flower filter without an action")?;
    p.min_len = if p.bytes_used() > l4 || !ranges.is_empty() {
        l4 + if proto == Some(6) { 20 } else { 8 }
    } else if p.bytes_used() > 14 {
        l4
    } else {
        14
    };
    let rewrite = if keys.is_empty() && !csum_ip4h && !csum_tcp {
        None
    } else {
        Some(Rewrite {
            edits: pedit::edits_of(&keys)?,
            csum_ip4h,
            csum_tcp,
            assumes_valid_csum: false,
        })
    };
    Ok(Decoded {
        pattern: p,
        ranges,
        action: act,
        packets,
        rewrite,
    })
}

fn src4(o: &[F]) -> [u8; 4] {
    o.iter()
        .find_map(|x| match x {
            F::Ipv4Src(a) => Some(a.octets()),
            _ => None,
        })
        .unwrap_or([0; 4])
}

fn dst4(o: &[F]) -> [u8; 4] {
    o.iter()
        .find_map(|x| match x {
            F::Ipv4Dst(a) => Some(a.octets()),
            _ => None,
        })
        .unwrap_or([0; 4])
}

fn addr6(o: &[F], src: bool) -> [u8; 16] {
    o.iter()
        .find_map(|x| match (x, src) {
            (F::Ipv6Src(a), true) | (F::Ipv6Dst(a), false) => Some(a.octets()),
            _ => None,
        })
        .unwrap_or([0; 16])
}

fn port(o: &[F], src: bool) -> u16 {
    o.iter()
        .find_map(|x| match (x, src) {
            (F::TcpSrc(v) | F::UdpSrc(v), true) | (F::TcpDst(v) | F::UdpDst(v), false) => Some(*v),
            _ => None,
        })
        .unwrap_or(0)
}

/// One action of a filter as nfkit writes them.
enum Act {
    Pedit(Vec<pedit::Key>),
    Csum(bool, bool),
    Last(RuleAction),
}

fn decode_action(a: &TcAction, dev: u32) -> Result<Act, FlowerError> {
    let kind = a.attributes.iter().find_map(|x| match x {
        TcActionAttribute::Kind(k) => Some(k.as_str()),
        _ => None,
    });
    let opts = a.attributes.iter().find_map(|x| match x {
        TcActionAttribute::Options(o) => Some(o),
        _ => None,
    });
    let opts = opts.ok_or("an action without options")?;
    match kind {
        Some("gact") => {
            for o in opts {
                if let TcActionOption::Other(n) = o {
                    if n.kind() == TCA_GACT_PARMS {
                        let mut b = vec![0u8; n.value_len()];
                        n.emit_value(&mut b);
                        let code = b
                            .get(8..12)
                            .map(|x| i32::from_ne_bytes([x[0], x[1], x[2], x[3]]));
                        return match code {
                            Some(2) => Ok(Act::Last(RuleAction::Drop)),
                            Some(0) => Ok(Act::Last(RuleAction::Pass)),
                            c => Err(format!("a gact action with code {c:?}").into()),
                        };
                    }
                }
            }
            Err("a gact action without parameters".into())
        }
        Some("mirred") => {
            for o in opts {
                if let TcActionOption::Mirror(TcActionMirrorOption::Parms(m)) = o {
                    if m.eaction != TcMirrorActionType::EgressRedir {
                        return Err(format!("a mirred action {:?}", m.eaction).into());
                    }
                    return Ok(Act::Last(if m.ifindex == dev {
                        RuleAction::Tx
                    } else {
                        RuleAction::Redirect(m.ifindex)
                    }));
                }
            }
            Err("a mirred action without parameters".into())
        }
        Some("pedit") => Ok(Act::Pedit(pedit::decode_pedit(opts)?)),
        Some("csum") => {
            let (ip, tcp) = pedit::decode_csum(opts)?;
            Ok(Act::Csum(ip, tcp))
        }
        k => Err(format!("action {k:?}, which nfkit does not write").into()),
    }
}

fn action_packets(a: &TcAction) -> Option<u64> {
    use netlink_packet_route::tc::TcStats2;
    a.attributes.iter().find_map(|x| match x {
        TcActionAttribute::Stats(s) => s.iter().find_map(|s| match s {
            TcStats2::Basic(b) => Some(u64::from(b.packets)),
            _ => None,
        }),
        _ => None,
    })
}
