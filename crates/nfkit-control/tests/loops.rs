//! Loops with large caps run through `bpf_loop`: they compile, the
//! kernel verifier accepts them (where the counted loop would exceed its
//! complexity limit), and the VM and the kernel (`BPF_PROG_TEST_RUN`)
//! give the same verdicts and map contents. Kernel parts need root and
//! are skipped otherwise.

mod common;
use common::*;
use nfkit_lang::{check, compile, Compiled, Options};

/// A UDP packet whose payload is `n` (u32 at offset 42) and `mode` (u8
/// at offset 46).
fn pkt(n: u32, mode: u8) -> Vec<u8> {
    let mut payload = n.to_be_bytes().to_vec();
    payload.push(mode);
    payload.extend_from_slice(&[0; 3]);
    udp4(
        [198, 18, 0, 1],
        [198, 18, 0, 2],
        1000,
        4242,
        0,
        64,
        &payload,
    )
}

/// Verdict codes and the script's map contents (array maps of u64).
type Run = (Vec<u64>, Vec<(String, Vec<(u64, u64)>)>);

fn vm_run(src: &str, packets: &[Vec<u8>]) -> (Compiled, Run) {
    let (c, mut vm) = load(src);
    let codes = packets.iter().map(|p| run(&mut vm, p).code).collect();
    let maps = vm.maps(&c.program);
    (c, (codes, maps))
}

/// The same in the kernel (None when not root).
fn kernel(c: &Compiled, packets: &[Vec<u8>]) -> Option<Run> {
    if !is_root() {
        eprintln!("skipped the kernel part: needs root");
        return None;
    }
    use nfkit_kernel::{load_image, LoadOptions, TestRun};
    let loaded = load_image(&c.image, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("kernel load: {e}\n{}", nfkit_lang::listing::listing(c)));
    for (m, k, v) in c.control_plane() {
        let map = loaded.map(&m).expect("control-plane map");
        map.update(&k, &v, 0).expect("control-plane write");
    }
    let prog = loaded.prog(c.entry().expect("entry")).expect("prog");
    let codes = packets
        .iter()
        .map(|p| prog.test_run(&TestRun::packet(p)).expect("test run").retval as u64)
        .collect();
    let mut maps = Vec::new();
    for d in &c.program.maps {
        let m = loaded.map(&d.name).expect("map");
        let mut rows = Vec::new();
        for k in 0..d.size {
            let v = m
                .lookup(&k.to_le_bytes())
                .expect("lookup")
                .unwrap_or_default();
            let mut b = [0u8; 8];
            b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
            let v = u64::from_le_bytes(b);
            if v != 0 {
                rows.push((k as u64, v));
            }
        }
        maps.push((d.name.clone(), rows));
    }
    Some((codes, maps))
}

/// Compiles, runs in the VM, checks the kernel agrees; the VM's result.
fn both(src: &str, packets: &[Vec<u8>]) -> (Compiled, Run) {
    let (c, vm) = vm_run(src, packets);
    if let Some(k) = kernel(&c, packets) {
        assert_eq!(vm, k, "VM / kernel");
    }
    (c, vm)
}

fn out(r: &Run) -> &[(u64, u64)] {
    &r.1.iter().find(|(n, _)| n == "out").expect("map out").1
}

/// True when a `bpf_loop` callback was generated.
fn uses_bpf_loop(c: &Compiled) -> bool {
    c.generated.funcs.iter().any(|f| f.callback)
}

const RANGE: &str = r#"
from nf.classify import every_packet
from nf.base import drop
out = ArrayMap(u64, 8)

def main() -> u64:
    n: u32 = Packet.read_u32(42)
    mode: u8 = Packet.read_u8(46)
    s: u64 = 0
    for i in range(n, cap=100000):
        if mode == 1 and i == 5000:
            break
        if mode == 2 and i % 2 == 1:
            continue
        if mode == 3 and i == 7777:
            out[3] = s
            return TX
        if mode == 4 and i == 9999:
            out[4] = i
            drop()
        if mode == 5 and i == 12345:
            out[5] = s
            return 77
        s += i + Packet.read_u8(14 + i % 20)
    out[0] = s
    out[1] = i
    return PASS

every_packet(main, fault=ABORTED)
"#;

/// Sum of i + (byte 14 + i % 20 of the packet) over i in 0..n (or `pick`).
fn sum(p: &[u8], n: u32, pick: impl Fn(u32) -> bool) -> u64 {
    (0..n)
        .filter(|&i| pick(i))
        .map(|i| i as u64 + p[14 + (i % 20) as usize] as u64)
        .sum()
}

#[test]
fn large_range_cap_runs_through_bpf_loop() {
    let c = compile("test.py", RANGE, &Options::default()).expect("compiles");
    assert!(uses_bpf_loop(&c));
    let w = nfkit_lang::diag::render(&c.warnings);
    assert!(w.contains("cap of 100000") && w.contains("bpf_loop"), "{w}");
    let packets = vec![
        pkt(0, 0),
        pkt(60000, 0),
        pkt(60000, 1),
        pkt(60000, 2),
        pkt(60000, 3),
        pkt(60000, 4),
        pkt(60000, 5),
        pkt(100000, 0),
        pkt(100001, 0),
        pkt(4_000_000, 0),
        pkt(10, 3),
    ];
    let (_, r) = both(RANGE, &packets);
    assert_eq!(
        r.0,
        vec![
            XDP_PASS,
            XDP_PASS,
            XDP_PASS,
            XDP_PASS,
            XDP_TX,
            XDP_DROP,
            XDP_PASS,
            XDP_PASS,
            XDP_ABORTED, // the cap exceeded: a fault
            XDP_ABORTED,
            XDP_PASS,
        ]
    );
    // The VM and the kernel ran the same program; check it computed the
    // right thing (the last packet that wrote each slot).
    let p = &packets[0];
    let o = out(&r);
    let get = |k: u64| o.iter().find(|r| r.0 == k).map(|r| r.1);
    assert_eq!(get(0), Some(sum(p, 10, |_| true)));
    assert_eq!(get(1), Some(10));
    assert_eq!(get(3), Some(sum(p, 7777, |_| true)));
    assert_eq!(get(4), Some(9999));
    assert_eq!(get(5), Some(sum(p, 12345, |_| true)));
}

#[test]
fn break_and_continue_in_bpf_loop() {
    let packets = [pkt(60000, 1)];
    let (_, r) = both(RANGE, &packets);
    let p = &packets[0];
    assert_eq!(
        out(&r),
        &[(0, sum(p, 5000, |_| true)), (1, 5000)][..],
        "break at 5000"
    );
    let packets = [pkt(60000, 2), pkt(100000, 0)];
    let (_, r) = both(RANGE, &packets);
    assert_eq!(r.0, vec![XDP_PASS, XDP_PASS]);
    let (_, r1) = both(RANGE, &packets[..1]);
    let p = &packets[0];
    assert_eq!(
        out(&r1),
        &[(0, sum(p, 60000, |i| i % 2 == 0)), (1, 60000)][..],
        "continue skips odd i"
    );
    assert_eq!(out(&r)[1], (1, 100000), "a loop that uses its whole cap");
}

const WHILE: &str = r#"
from nf.classify import every_packet
from nf.parse import dst_port
out = ArrayMap(u64, 8)
LOOP_CAP = 100000

def main() -> u64:
    n: u32 = Packet.read_u32(42)
    k: u32 = 0
    x: u64 = 1
    while k < n:
        x = x * 3 + k + dst_port()
        k += 1
    out[0] = x
    out[1] = k
    return PASS

every_packet(main, fault=ABORTED)
"#;

#[test]
fn while_with_large_loop_cap_and_an_nf_call() {
    let c = check::check("test.py", WHILE, &Options::default()).expect("checks");
    let w = nfkit_lang::diag::render(&c.warnings);
    assert!(
        w.contains("cap of 100000") && w.contains("compiled to bpf_loop"),
        "{w}"
    );
    let packets = vec![pkt(60000, 0), pkt(100000, 0), pkt(100001, 0), pkt(3, 0)];
    let (c, r) = both(WHILE, &packets);
    assert!(uses_bpf_loop(&c));
    assert_eq!(r.0, vec![XDP_PASS, XDP_PASS, XDP_ABORTED, XDP_PASS]);
    let mut x: u64 = 1;
    for k in 0..3u64 {
        x = x.wrapping_mul(3).wrapping_add(k + 4242);
    }
    assert_eq!(out(&r), &[(0, x), (1, 3)][..]);
}

const NESTED: &str = r#"
from nf.classify import every_packet
out = ArrayMap(u64, 8)

def first_square_above(n: u32, x: u64) -> u32:
    for i in range(n, cap=50000):
        if u64(i) * u64(i) >= x:
            return i
    return 0xffff

def main() -> u64:
    n: u32 = Packet.read_u32(42)
    s: u64 = 0
    for j in range(3):
        for i in range(n, cap=5000):
            s += i * j
    t: u64 = 0
    for i in range(n, cap=100000):
        for j in range(4):
            t += j
    out[0] = s
    out[1] = t
    out[2] = first_square_above(n, 1000000)
    big: u64 = 0
    for i in range(1, 40001):
        big += i
    out[3] = big
    return PASS

every_packet(main, fault=ABORTED)
"#;

#[test]
fn nested_counted_and_bpf_loops_and_a_return_from_an_inlined_chain() {
    let packets = vec![pkt(4000, 0), pkt(2000, 0), pkt(5001, 0)];
    let (c, r) = both(NESTED, &packets);
    // Three loops with caps, the constant range of 40000, through bpf_loop.
    assert_eq!(c.generated.funcs.iter().filter(|f| f.callback).count(), 4);
    assert_eq!(r.0, vec![XDP_PASS, XDP_PASS, XDP_ABORTED]);
    let n: u64 = 2000;
    let s: u64 = (0..3).map(|j| (0..n).map(|i| i * j).sum::<u64>()).sum();
    assert_eq!(
        out(&r),
        &[(0, s), (1, 6 * n), (2, 1000), (3, 40000 * 40001 / 2)][..]
    );
    let (_, r) = both(NESTED, &[pkt(900, 0)]);
    assert_eq!(out(&r)[2], (2, 0xffff), "no square above 10^6 below 900");
}

#[test]
fn bpf_loop_inside_bpf_loop_through_a_chain_call_is_an_error() {
    let src = r#"
from nf.classify import every_packet

def inner(n: u32) -> u32:
    s: u32 = 0
    for i in range(n, cap=5000):
        s += i
    return s

def main() -> u64:
    n: u32 = Packet.read_u32(42)
    s: u32 = 0
    for i in range(n, cap=5000):
        s += inner(i)
    return PASS

every_packet(main)
"#;
    let e = match compile("test.py", src, &Options::default()) {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("inside the body of another bpf_loop"), "{e}");
}

#[test]
fn largest_cap_passes_the_verifier() {
    let src = r#"
from nf.classify import every_packet
out = ArrayMap(u64, 8)

def main() -> u64:
    n: u32 = Packet.read_u32(42)
    s: u64 = 0
    for i in range(n, cap=8388607):
        s += Packet.read_u8(14 + i % 32)
    out[0] = s
    return PASS

every_packet(main, fault=ABORTED)
"#;
    let packets = vec![pkt(1000, 0)];
    let (_, r) = both(src, &packets);
    assert_eq!(r.0, vec![XDP_PASS]);
    let p = &packets[0];
    let want: u64 = (0..1000).map(|i| p[14 + i % 32] as u64).sum();
    assert_eq!(out(&r), &[(0, want)][..]);
}

/// Counters that start at a constant and a packet offset that changes
/// every iteration: the verifier must not walk the iterations one by one.
const CARRIED: &str = r#"
from nf.classify import every_packet
out = ArrayMap(u64, 8)
LOOP_CAP = 200000

def main() -> u64:
    k: u32 = 0
    while k < 150000:
        k += 1
    n: u32 = Packet.read_u32(42)
    j: u32 = 0
    s: u64 = 0
    flag: bool = False
    while j < n:
        s += Packet.read_u8(14 + j % 16)
        flag = not flag
        j += 1
    for i in range(n, cap=100000):
        if i % 1000 == 999:
            i += 1
        s += 1
    out[0] = k
    out[1] = s
    out[2] = u64(flag)
    return PASS

every_packet(main, fault=ABORTED)
"#;

#[test]
fn loop_carried_locals_that_start_at_constants() {
    let packets = vec![pkt(30001, 0), pkt(7, 0)];
    let (c, r) = both(CARRIED, &packets);
    assert_eq!(c.generated.funcs.iter().filter(|f| f.callback).count(), 3);
    assert_eq!(r.0, vec![XDP_PASS, XDP_PASS]);
    let p = &packets[1];
    let bytes: u64 = (0..7).map(|j| p[14 + j % 16] as u64).sum();
    // The range loop skips one value per 1000 (the body steps i too).
    assert_eq!(out(&r), &[(0, 150000), (1, bytes + 7), (2, 1)][..]);
    let (_, r) = both(CARRIED, &packets[..1]);
    let p = &packets[0];
    let bytes: u64 = (0..30001).map(|j| p[14 + j % 16] as u64).sum();
    let range_trips = (0..30001u32)
        .scan(0u32, |i, _| {
            if *i >= 30001 {
                return None;
            }
            if *i % 1000 == 999 {
                *i += 1;
            }
            *i += 1;
            Some(())
        })
        .count() as u64;
    assert_eq!(
        out(&r),
        &[(0, 150000), (1, bytes + range_trips), (2, 1)][..]
    );
}

#[test]
fn bpf_loop_on_tc_reads_and_writes_the_packet_in_the_kernel() {
    let src = r#"
from nf.classify import every_packet
out = ArrayMap(u64, 8)

def main() -> u64:
    n: u32 = Packet.read_u32(42)
    s: u64 = 0
    for i in range(n, cap=100000):
        s += Packet.read_u8(14 + i % 16)
        Packet.write_u8(47, u8(i))
    out[0] = s
    return PASS

every_packet(main, fault=ABORTED)
attach("eth0", "tc-ingress")
"#;
    // The VM's kernel profile has no TC classifier helpers: the kernel only.
    let c = compile("test.py", src, &Options::default()).expect("compiles");
    assert!(uses_bpf_loop(&c));
    let packets = vec![pkt(5000, 0), pkt(100001, 0)];
    let Some(r) = kernel(&c, &packets) else {
        return;
    };
    assert_ne!(r.0[0], r.0[1], "PASS, then a fault");
    let p = &packets[0];
    let want: u64 = (0..5000).map(|i| p[14 + i % 16] as u64).sum();
    assert_eq!(out(&r), &[(0, want)][..]);
}

#[test]
fn the_stack_check_counts_the_callback_frame() {
    // 36 locals in main (288 bytes) and a chain with 36 locals inlined in
    // the loop body (the callback's frame): each fits 512 bytes, both
    // together do not.
    let locals = |p: &str| {
        (0..36)
            .map(|i| format!("    {p}{i}: u64 = n + {i}\n"))
            .collect::<String>()
    };
    let src = format!(
        "from nf.classify import every_packet\n\ndef inner(n: u64) -> u64:\n{}    return a35\n\ndef main() -> u64:\n    n: u64 = Packet.read_u8(42)\n{}    for i in range(n, cap=5000):\n        b0 += inner(i)\n    return b0\n\nevery_packet(main)\n",
        locals("a"),
        locals("b")
    );
    let e = match compile("test.py", &src, &Options::default()) {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("main -> main__loop0"), "{e}");
}
