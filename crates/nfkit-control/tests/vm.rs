//! Compiled chains running in the VM on crafted packets.

mod common;
use common::*;

const TTL: &str = r#"
from nf.classify import every_packet
cnt = ArrayMap(u64, 4)

def main() -> u64:
    ttl: u8 = Packet.read_u8(22)
    if ttl < 10:
        cnt[1] += 1
        return DROP
    cnt[0] += 1
    Packet.write_u8(22, ttl - 1)
    return PASS

every_packet(main)
"#;

#[test]
fn straight_line_chain_reads_writes_and_counts() {
    let (c, mut vm) = load(TTL);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 53, 0, 64, b"hello");
    let o = run(&mut vm, &p);
    assert_eq!(o.code, XDP_PASS);
    assert_eq!(o.packet[22], 63);
    let o = run(
        &mut vm,
        &udp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 53, 0, 5, b""),
    );
    assert_eq!(o.code, XDP_DROP);
    assert_eq!(map(&c, &vm, "cnt"), vec![(0, 1), (1, 1)]);
    let st = vm.stats();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].chain, "main");
    assert_eq!(st[0].counts[1], 1);
    assert_eq!(st[0].counts[2], 1);
}

fn p4(src: u8, dst: u8) -> Vec<u8> {
    udp4(
        [198, 18, 0, src],
        [198, 18, 1, dst],
        1000,
        53,
        0,
        64,
        b"payload!",
    )
}

#[test]
fn nf_verdict_ends_the_whole_chain() {
    let src = r#"
from nf.classify import every_packet
from nf.base import drop
hits = ArrayMap(u64, 2)

def inner() -> u64:
    hits[0] += 1
    drop()
    hits[1] += 1
    return 1

def main() -> u64:
    x: u64 = inner()
    hits[1] += 100
    return PASS

every_packet(main)
"#;
    let (c, mut vm) = load(src);
    assert_eq!(run(&mut vm, &p4(1, 1)).code, XDP_DROP);
    assert_eq!(map(&c, &vm, "hits"), vec![(0, 1)]);
}

#[test]
fn ddos_two_level_mitigation_of_the_reference() {
    let src = r#"
from nf.meter import tb_dst, tb_srcdst
from nf.sets import src_set, SET_LOOKUP, SET_ADD
from nf.sample import one_in
from nf.classify import every_packet

COLLECTOR = 7
stats = PercpuArrayMap(u64, 4)

def mitigate() -> u64:
    if src_set(SET_LOOKUP, 0) == 1:
        if one_in(4) == 1:
            stats[2] += 1
            return REDIRECT(COLLECTOR)
        stats[1] += 1
        return DROP
    if tb_dst(10, 5) == 0:
        stats[0] += 1
        return PASS
    if tb_srcdst(10, 2) == 1:
        src_set(SET_ADD, 10_000_000_000)
        stats[1] += 1
        return DROP
    stats[0] += 1
    return PASS

every_packet(mitigate)
"#;
    let (c, mut vm) = load(src);
    // 5 packets in the destination's burst pass, then the pair's burst
    // of 2 passes, then the source is blacklisted.
    let mut codes = Vec::new();
    for _ in 0..20 {
        codes.push(run_at(&mut vm, &p4(1, 1), 1_000_000_000).code);
    }
    assert!(codes[..7].iter().all(|&c| c == XDP_PASS), "{codes:?}");
    assert_eq!(codes[7], XDP_DROP);
    let redirects = codes[8..].iter().filter(|&&c| c == XDP_REDIRECT).count();
    let drops = codes[8..].iter().filter(|&&c| c == XDP_DROP).count();
    assert_eq!(redirects + drops, 12);
    assert_eq!(redirects, 3, "one in 4 sampled: {codes:?}");
    let s = map(&c, &vm, "stats");
    assert_eq!(s, vec![(0, 7), (1, 10), (2, 3)]);
}

#[test]
fn chain_calls_are_inlined_with_their_own_locals() {
    let src = r#"
from nf.classify import by_dscp

def dec_ttl(by: u8) -> u8:
    t: u8 = Packet.read_u8(22)
    if t <= by:
        return 0
    t = t - by
    Packet.write_u8(22, t)
    return t

def voice() -> u64:
    t: u8 = dec_ttl(1)
    if t == 0:
        return DROP
    return TX

def bulk() -> u64:
    t: u8 = dec_ttl(10)
    u: u8 = dec_ttl(10)
    if u == 0:
        return DROP
    return PASS

by_dscp({46: voice, 10: bulk}, default=DROP)
"#;
    let (_c, mut vm) = load(src);
    let ef = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 46 << 2, 64, b"");
    let o = run(&mut vm, &ef);
    assert_eq!(o.code, XDP_TX);
    assert_eq!(o.packet[22], 63);
    let af = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 10 << 2, 64, b"");
    let o = run(&mut vm, &af);
    assert_eq!(o.code, XDP_PASS);
    assert_eq!(o.packet[22], 44);
    let af = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 10 << 2, 15, b"");
    assert_eq!(run(&mut vm, &af).code, XDP_DROP);
    let other = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, b"");
    assert_eq!(run(&mut vm, &other).code, XDP_DROP, "default action");
    let st = vm.stats();
    let names: Vec<&str> = st.iter().map(|s| s.chain.as_str()).collect();
    assert_eq!(names, vec!["(unclaimed)", "voice", "bulk"]);
}

#[test]
fn loops_bounds_caps_and_faults() {
    let src = r#"
from nf.classify import every_packet
out = ArrayMap(u64, 8)
LOOP_CAP = 5

def main() -> u64:
    s: u64 = 0
    for i in range(10):
        if i == 7:
            break
        if i % 2 == 1:
            continue
        s += i
    out[0] = s
    n: u32 = Packet.read_u8(42)
    k: u32 = 0
    while k < n:
        k += 1
    out[1] = k
    j: u64 = 0
    for i in range(10, 0, -2):
        j = j * 10 + u64(i)
    out[2] = j
    return PASS

every_packet(main)
"#;
    let (c, mut vm) = load(src);
    assert!(
        c.warnings.iter().any(|w| w.message.contains("cap of 5")),
        "{:?}",
        c.warnings
    );
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, &[4]);
    assert_eq!(run(&mut vm, &p).code, XDP_PASS);
    assert_eq!(map(&c, &vm, "out"), vec![(0, 12), (1, 4), (2, 108642)]);
    // Over the cap: a fault, the fault action (DROP) and the fault counter.
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, &[9]);
    assert_eq!(run(&mut vm, &p).code, XDP_DROP);
    assert_eq!(vm.stats()[0].counts[9], 1);
}

#[test]
fn maps_as_dictionaries() {
    let src = r#"
from nf.classify import every_packet
seen = HashMap(u32, u64, 64)
flags = HashMap(u16, u8, 64)
res = ArrayMap(s64, 4)

def main() -> u64:
    dst: u32 = Packet.read_u32(30)
    seen[dst] += 2
    seen[dst] -= 1
    if dst in seen:
        res[0] = 1
    if 5 not in seen:
        res[1] = s64(seen.get(5, 77))
    flags[7] = 200
    flags[7] += 100
    res[2] = s64(flags[7])
    res[3] = -5
    if seen[dst] >= 3:
        del seen[dst]
    return PASS

every_packet(main)
"#;
    let (c, mut vm) = load(src);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, b"");
    for _ in 0..2 {
        run(&mut vm, &p);
    }
    let dst = u32::from_be_bytes([198, 18, 0, 2]) as u64;
    assert_eq!(map(&c, &vm, "seen"), vec![(dst, 2)]);
    let res = map(&c, &vm, "res");
    assert_eq!(res, vec![(0, 1), (1, 77), (2, 44), (3, (-5i64) as u64)]);
    run(&mut vm, &p);
    assert_eq!(map(&c, &vm, "seen"), vec![], "deleted at 3");
}

#[test]
fn arithmetic_wraps_and_truncates_like_the_reference() {
    let src = r#"
from nf.classify import every_packet
r = ArrayMap(u64, 16)

def main() -> u64:
    a: s32 = s32(Packet.read_u8(42)) - 10
    b: u8 = Packet.read_u8(43)
    r[0] = u64(a // 3)
    r[1] = u64(a % 3)
    r[2] = u64(b + 200)
    r[3] = u64(b * b)
    z: u8 = 0
    r[4] = u64(b // z)
    r[5] = u64(b % z)
    r[6] = u64(a >> 1)
    r[7] = u64(b << 9)
    r[8] = u64(-a)
    r[9] = u64(~b)
    r[10] = 1 if a < 0 and b > 3 else 2
    r[11] = u64(not (a < 0))
    return PASS

every_packet(main)
"#;
    let (c, mut vm) = load(src);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, &[3, 100]);
    run(&mut vm, &p);
    let got: std::collections::HashMap<u64, u64> = map(&c, &vm, "r").into_iter().collect();
    let a: i32 = 3 - 10;
    let b: u8 = 100;
    assert_eq!(got[&0], (a / 3) as i64 as u64);
    assert_eq!(got[&1], (a % 3) as i64 as u64);
    assert_eq!(got[&2], b.wrapping_add(200) as u64);
    assert_eq!(got[&3], b.wrapping_mul(b) as u64);
    assert_eq!(got.get(&4), None, "x // 0 == 0");
    assert_eq!(got[&5], 100, "x % 0 == x");
    assert_eq!(got[&6], (a >> 1) as i64 as u64);
    assert_eq!(got[&7], (b << 1) as u64, "shift count modulo 8");
    assert_eq!(got[&8], 7);
    assert_eq!(got[&9], (!b) as u64);
    assert_eq!(got[&10], 1);
    assert_eq!(got.get(&11), None);
}

#[test]
fn out_of_bounds_packet_read_is_a_fault() {
    let src = r#"
from nf.classify import every_packet

def main() -> u64:
    x: u32 = Packet.read_u32(Packet.len - 2)
    return PASS

every_packet(main, fault=ABORTED)
"#;
    let (_c, mut vm) = load(src);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, b"");
    assert_eq!(run(&mut vm, &p).code, XDP_ABORTED);
}

#[test]
fn plain_value_gets_the_default_action_and_info_fields_read() {
    let src = r#"
from nf.classify import every_packet
r = ArrayMap(u32, 8)

def main() -> u64:
    r[0] = Packet.l3_off
    r[1] = Packet.l4_off
    r[2] = Packet.ip_version
    r[3] = Packet.l4_proto
    r[4] = Packet.len
    r[5] = Packet.dport
    return 5

every_packet(main, default=TX)
"#;
    let (c, mut vm) = load(src);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 53, 0, 64, b"abc");
    assert_eq!(run(&mut vm, &p).code, XDP_TX);
    assert_eq!(
        map(&c, &vm, "r"),
        vec![
            (0, 14),
            (1, 34),
            (2, 4),
            (3, 17),
            (4, p.len() as u64),
            (5, 53)
        ]
    );
    assert_eq!(vm.stats()[0].counts[8], 1);
}

#[test]
fn stack_budget_error_names_the_path() {
    let mut src = String::from("from nf.classify import every_packet\n\ndef big(a: u64) -> u64:\n");
    for i in 0..40 {
        src.push_str(&format!("    x{i}: u64 = a + {i}\n"));
    }
    src.push_str("    return x0\n\ndef main() -> u64:\n");
    for i in 0..30 {
        src.push_str(&format!("    y{i}: u64 = {i}\n"));
    }
    src.push_str("    return big(y0)\n\nevery_packet(main)\n");
    let e = nfkit_lang::compile("deep.py", &src, &nfkit_lang::Options::default())
        .expect_err("too much stack");
    let msg = e.to_string();
    assert!(
        msg.contains("stack") && msg.contains("512") && msg.contains("main -> big"),
        "{msg}"
    );
}

const HOOKED: &str = r#"
from nf.classify import every_packet
seen = ArrayMap(u64, 2)

def main() -> u64:
    seen[0] = u64(Packet.read_u16(12))
    seen[1] = u64(Packet.len)
    if Packet.read_u8(23) == 17:
        return DROP
    return PASS

every_packet(main)
"#;

#[test]
fn tc_and_socket_hooks() {
    // TC: offsets from L2, TC_ACT_SHOT (2) for DROP, TC_ACT_OK (0) for
    // PASS, in the VM (its classifier floods with bpf_clone_redirect) and
    // in the kernel (as root).
    let tc = format!("{HOOKED}attach(\"eth0\", \"tc-ingress\")\n");
    let c = build(&tc);
    assert_eq!(c.hook, nfkit_nf::Hook::Tc);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, b"x");
    let mut t = tcp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0x10, &[]);
    let mut vm = nfkit_control::runner::ScriptVm::new(&c).expect("TC script loads in the VM");
    assert_eq!(run(&mut vm, &p).code, 2, "UDP dropped");
    assert_eq!(run(&mut vm, &t).code, 0, "TCP passed");
    if is_root() {
        let k = kernel_run(&c, &[(1, p.clone()), (2, t.clone())]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k[0].0, 2);
        assert_eq!(k[1].0, 0);
    }
    // Socket filters: offsets from the network header, read-only; the
    // packet's length to keep it, 0 to drop it (kernel: the VM lacks
    // bpf_skb_load_bytes_relative).
    let sock = format!(
        "{}attach(\"lo\", \"socket\")\n",
        HOOKED.replace("read_u8(23)", "read_u8(9)")
    );
    let c = build(&sock);
    assert_eq!(c.hook, nfkit_nf::Hook::Socket);
    t.truncate(t.len());
    if is_root() {
        let k = kernel_run(&c, &[(1, t.clone()), (2, p.clone())]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            k[0].0,
            (t.len() - 14) as u64,
            "kept: the length after the Ethernet header"
        );
        assert_eq!(k[1].0, 0, "UDP dropped");
    }
}

#[test]
fn chains_imported_from_a_library_script_bring_their_maps_and_nfs() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../nfkit-lang/tests/scripts/main.py");
    let src = std::fs::read_to_string(&path).expect("script");
    let c = nfkit_lang::compile(
        &path.display().to_string(),
        &src,
        &nfkit_lang::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut vm = nfkit_control::runner::ScriptVm::new(&c).expect("load");
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 0, 64, b"");
    let codes: Vec<u64> = (0..4).map(|_| run(&mut vm, &p).code).collect();
    assert_eq!(codes, vec![XDP_PASS, XDP_PASS, XDP_DROP, XDP_DROP]);
    assert_eq!(map(&c, &vm, "hits"), vec![(0, 4), (1, 2), (3, 2)]);
}

/// A comparison the checker warns is decided by the operand's range keeps
/// that constant value at run time.
#[test]
fn comparisons_out_of_range_keep_their_value_in_the_vm() {
    let (_, mut vm) = load(
        r#"
from nf.classify import every_packet

out = ArrayMap(u64, 8)

def main() -> u64:
    x: u8 = Packet.read_u8(23)
    out[0] = u64(x == 300)
    out[1] = u64(x != -1)
    out[2] = u64(x < 0)
    out[3] = u64(x >= 0)
    out[4] = u64(300 > x)
    out[5] = u64(x <= -1)
    out[6] = u64(x == 17)
    return PASS

every_packet(main)
"#,
    );
    // Byte 23 is the IPv4 protocol: 17 (UDP).
    let o = run(
        &mut vm,
        &udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[]),
    );
    assert_eq!(o.code, XDP_PASS);
    let m = vm.vm.map("out").expect("out");
    let got = u64_slots(7, |k| m.lookup(k).ok().flatten());
    assert_eq!(got, [0, 1, 0, 1, 1, 0, 1]);
}

/// `nfkit run SCRIPT --trace` prints each step as disassembly with what it
/// did (registers changed, memory touched), not debug structs.
#[test]
fn script_trace_lines() {
    let c = build(
        r#"
from nf.classify import every_packet

def main() -> u64:
    return PASS

every_packet(main)
attach("lo", "xdp")
"#,
    );
    let frame = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[]);
    let r = nfkit_control::runner::run_capture(&c, &[(1, frame.clone())], true).expect("run");
    let steps = &r.traces[0];
    assert!(steps.iter().any(|l| l.ends_with(':')), "{steps:#?}");
    assert!(
        steps
            .iter()
            .any(|l| l.contains("(was ") && l.contains("; ")),
        "{steps:#?}"
    );
    assert!(!steps.iter().any(|l| l.contains("TraceStep")), "{steps:#?}");
    let text = r.text(true);
    assert!(text.contains("packet 1: chain"), "{text}");
}

/// A socket filter's kept packet is the first `code` bytes: PASS keeps it
/// whole (the hook's code is the length), DROP keeps nothing.
#[test]
fn script_socket_filter_keeps_what_it_returns() {
    let c = build(
        r#"
from nf.classify import every_packet

def main() -> u64:
    if Packet.len > 60:
        return DROP
    return PASS

every_packet(main)
attach("lo", "socket")
"#,
    );
    let small = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[]);
    let big = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[7; 40]);
    let r = nfkit_control::runner::run_capture(&c, &[(1, small.clone()), (2, big)], false)
        .expect("run");
    assert_eq!(r.lines[0].verdict, "PASS");
    assert_eq!(r.lines[1].verdict, "DROP");
    assert_eq!(r.out.len(), 1, "{:?}", r.lines);
    let kept = &r.out[0].1;
    assert_eq!(kept.len() as u64, r.lines[0].code.min(small.len() as u64));
    assert_eq!(&kept[..], &small[..kept.len()]);
}
