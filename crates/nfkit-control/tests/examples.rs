//! The examples in `examples/`: each script runs in the VM on its pcap
//! and must give exactly its expected report (`<name>.expected`, the text
//! `nfkit run` prints) and output packets (`<name>.out.pcap`). The input
//! pcaps are generated here, deterministically; NFKIT_BLESS=1 rewrites
//! the pcaps and the expected files. Every example runs on both engines
//! (the JIT and the interpreter): both must give the expected report and
//! packets.

mod common;
use common::*;
use nfkit_control::runner::{run_capture_on, Report};
use nfkit_lang::{compile, Options};
use nfkit_pcap::Packet;
use nfkit_vm::{Engine, EngineUse};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn ip(a: u8, b: u8) -> [u8; 4] {
    [198, 18, a, b]
}

/// `ddos`: three legitimate sources, 10 packets each every 100 ms; an
/// attacker sending 300 packets at 1 ms from t = 0.2 s.
fn ddos_packets() -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    for i in 0..10u64 {
        for s in 10..13u8 {
            v.push((
                S + i * 100 * MS + s as u64,
                udp4(ip(0, s), ip(1, 1), 1000 + s as u16, 80, 0, 64, b"legit"),
            ));
        }
    }
    for i in 0..300u64 {
        v.push((
            S + 200 * MS + i * MS + 50,
            udp4(ip(0, 66), ip(1, 1), 4444, 80, 0, 64, b"flood"),
        ));
    }
    v.sort_by_key(|(t, _)| *t);
    v
}

/// `dscp_dispatch`: UDP with various DSCP values, TTLs and lengths, 1 ms
/// apart.
fn dscp_dispatch_packets() -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    let mut t = S;
    for (dscp, ttl, len) in [
        (46u8, 64u8, 10usize),
        (46, 1, 10),
        (34, 30, 100),
        (8, 64, 50),
        (8, 64, 400),
        (0, 64, 10),
        (34, 1, 10),
        (46, 2, 1),
    ] {
        v.push((
            t,
            udp4(
                ip(0, 1),
                ip(1, 1),
                5000,
                6000,
                dscp << 2,
                ttl,
                &vec![0xab; len],
            ),
        ));
        t += MS;
    }
    v
}

/// `flow_limiter`: flow A, 12 packets 10 ms apart (a burst of 4, then
/// limited); flow B, 6 packets 200 ms apart (all pass); flow C, TCP, 8 at
/// 50 ms.
fn flow_limiter_packets() -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    for i in 0..12u64 {
        v.push((
            S + i * 10 * MS,
            udp4(ip(0, 1), ip(1, 1), 1111, 53, 0, 64, b"a"),
        ));
    }
    for i in 0..6u64 {
        v.push((
            S + i * 200 * MS + 1,
            udp4(ip(0, 2), ip(1, 1), 2222, 53, 0, 64, b"b"),
        ));
    }
    for i in 0..8u64 {
        v.push((
            S + i * 50 * MS + 2,
            tcp4(ip(0, 3), ip(1, 1), 3333, 443, 0x10, &[]),
        ));
    }
    v.sort_by_key(|(t, _)| *t);
    v
}

/// `tcp_options`: SYNs (and one non-SYN) with various TCP options, then a
/// UDP packet.
fn tcp_options_packets() -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    let syn = 0x02;
    let cases: Vec<(u8, Vec<u8>)> = vec![
        (syn, vec![2, 4, 0x05, 0xb4]),  // MSS 1460: clamped
        (syn, vec![2, 4, 0x04, 0xb0]),  // MSS 1200: kept
        (syn, vec![]),                  // no options
        (0x10, vec![2, 4, 0x05, 0xb4]), // not a SYN
        (
            syn,
            vec![
                1, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 4, 0x23, 0x28,
            ],
        ), // NOPs, WS, SACK-perm, timestamps, MSS 9000
        (syn, vec![1, 3, 0, 1]),        // option length 0: dropped
        (syn, vec![0, 2, 4, 0x05, 0xb4]), // end of options first
    ];
    for (i, (flags, opts)) in cases.into_iter().enumerate() {
        v.push((
            S + i as u64 * MS,
            tcp4(ip(0, 1), ip(1, 1), 40000 + i as u16, 443, flags, &opts),
        ));
    }
    v.push((S + 10 * MS, udp4(ip(0, 1), ip(1, 1), 1, 53, 0, 64, b"udp")));
    v
}

/// `port_stats`: UDP to three ports with various lengths, then an ARP
/// frame.
fn port_stats_packets() -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    let mut t = S;
    for (port, len) in [
        (53u16, 10usize),
        (80, 100),
        (53, 20),
        (443, 30),
        (53, 10),
        (53, 10),
        (80, 200),
        (53, 10),
        (53, 10),
        (53, 10),
        (443, 40),
        (53, 5),
        (80, 1),
    ] {
        v.push((t, udp4(ip(0, 1), ip(1, 1), 999, port, 0, 64, &vec![1; len])));
        t += MS;
    }
    // A non-IP frame (ARP): no L4 header, passes.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    v.push((t, arp));
    v
}

/// The input packets of each example.
fn packets(name: &str) -> Vec<(u64, Vec<u8>)> {
    match name {
        "ddos" => ddos_packets(),
        "dscp_dispatch" => dscp_dispatch_packets(),
        "flow_limiter" => flow_limiter_packets(),
        "tcp_options" => tcp_options_packets(),
        "port_stats" => port_stats_packets(),
        _ => Vec::new(),
    }
}

fn run_example(name: &str) -> (nfkit_lang::Compiled, nfkit_control::runner::Report) {
    let d = examples_dir();
    let bless = std::env::var_os("NFKIT_BLESS").is_some();
    let pcap = d.join(format!("{name}.pcap"));
    if bless || !pcap.exists() {
        let pk: Vec<Packet> = packets(name)
            .into_iter()
            .map(|(t, b)| Packet::new(t, b))
            .collect();
        nfkit_pcap::write_file(&pcap, &pk).expect("write pcap");
    }
    let src = std::fs::read_to_string(d.join(format!("{name}.py"))).expect("script");
    let file = format!("examples/{name}.py");
    let c = compile(&file, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let input: Vec<(u64, Vec<u8>)> = nfkit_pcap::read_file(&pcap)
        .expect("pcap")
        .into_iter()
        .map(|p| (p.ts_ns, p.data))
        .collect();
    assert_eq!(
        input,
        packets(name),
        "{name}.pcap is what the generator makes"
    );
    let report = run_capture_on(&c, &input, false, Engine::Interp).expect("run");
    assert_eq!(report.engine, EngineUse::Interp, "{name}: engine");
    let jit = run_capture_on(&c, &input, false, Engine::Jit).expect("run on the JIT");
    // Where the JIT exists, it compiles every example.
    let want = if Engine::best() == Engine::Jit {
        matches!(jit.engine, EngineUse::Jit)
    } else {
        matches!(jit.engine, EngineUse::Fallback(_))
    };
    assert!(want, "{name}: asked for the JIT, ran on {}", jit.engine);
    same_on_both_engines(name, &report, &jit);
    let text = report.text(false);
    let out: Vec<Packet> = report
        .out
        .iter()
        .map(|(t, b)| Packet::new(*t, b.clone()))
        .collect();
    let exp = d.join(format!("{name}.expected"));
    let out_path = d.join(format!("{name}.out.pcap"));
    if bless {
        std::fs::write(&exp, &text).expect("write expected");
        nfkit_pcap::write_file(&out_path, &out).expect("write out");
    }
    assert_eq!(
        text,
        std::fs::read_to_string(&exp).unwrap_or_default(),
        "{name}: report"
    );
    let want_out = nfkit_pcap::read_file(&out_path).expect("out pcap");
    assert_eq!(out, want_out, "{name}: output packets");
    (c, report)
}

/// The JIT's run of an example is the interpreter's, packet by packet.
fn same_on_both_engines(name: &str, interp: &Report, jit: &Report) {
    assert_eq!(jit.lines.len(), interp.lines.len(), "{name}: packets");
    for (j, i) in jit.lines.iter().zip(&interp.lines) {
        assert_eq!(
            (&j.chain, &j.verdict, j.code, j.redirect, &j.error),
            (&i.chain, &i.verdict, i.code, i.redirect, &i.error),
            "{name}: packet {} on the JIT vs the interpreter",
            i.index
        );
    }
    assert_eq!(jit.text(false), interp.text(false), "{name}: JIT report");
    assert_eq!(jit.out, interp.out, "{name}: JIT output packets");
}

#[test]
fn every_example_gives_its_expected_output() {
    for n in EXAMPLES {
        run_example(n);
    }
}

#[test]
fn every_example_script_is_run() {
    let mut scripts: Vec<String> = std::fs::read_dir(examples_dir())
        .expect("examples/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".py").map(str::to_string))
        .collect();
    scripts.sort();
    // `router` (a pipeline) has its own test, tests/router.rs.
    let mut listed: Vec<String> = EXAMPLES
        .iter()
        .chain(&["router"])
        .map(|s| s.to_string())
        .collect();
    listed.sort();
    assert_eq!(scripts, listed, "examples/*.py and EXAMPLES");
}

#[test]
fn ddos_example_behaves_as_described() {
    let (_c, r) = run_example("ddos");
    let legit: Vec<_> = r
        .lines
        .iter()
        .zip(packets("ddos"))
        .filter(|(_, (_, p))| p[29] != 66)
        .map(|(l, _)| l.verdict.clone())
        .collect();
    assert!(
        legit.iter().all(|v| v == "PASS"),
        "legitimate sources always pass: {legit:?}"
    );
    let attack: Vec<_> = r
        .lines
        .iter()
        .zip(packets("ddos"))
        .filter(|(_, (_, p))| p[29] == 66)
        .map(|(l, _)| l.verdict.clone())
        .collect();
    let redirects = attack.iter().filter(|v| *v == "REDIRECT").count();
    let drops = attack.iter().filter(|v| *v == "DROP").count();
    assert!(drops > 200, "the attacker is mostly dropped: {drops}");
    assert!(
        redirects > 0 && redirects * 8 < drops,
        "one in 10 sampled: {redirects} / {drops}"
    );
    let counters = &r
        .maps
        .iter()
        .find(|(n, _)| n == "counters")
        .expect("counters")
        .1;
    let total: u64 = counters.iter().map(|(_, v)| v).sum();
    assert_eq!(total, r.packets as u64);
}

#[test]
fn dscp_example_rewrites_ttl_with_a_valid_checksum() {
    let (_c, r) = run_example("dscp_dispatch");
    let verdicts: Vec<&str> = r.lines.iter().map(|l| l.verdict.as_str()).collect();
    assert_eq!(
        verdicts,
        ["REDIRECT", "DROP", "PASS", "PASS", "DROP", "VALUE", "DROP", "REDIRECT"]
    );
    for (_, p) in &r.out {
        assert_eq!(checksum(&p[14..34]), 0, "IPv4 checksum stays valid");
    }
    assert_eq!(r.out[0].1[22], 63);
}

#[test]
fn tcp_options_example_clamps_mss_with_a_valid_checksum() {
    let (_c, r) = run_example("tcp_options");
    let verdicts: Vec<&str> = r.lines.iter().map(|l| l.verdict.as_str()).collect();
    assert_eq!(
        verdicts,
        ["PASS", "PASS", "PASS", "PASS", "PASS", "DROP", "PASS", "PASS"]
    );
    let first = &r.out[0].1;
    assert_eq!(&first[56..58], &1400u16.to_be_bytes());
    for (_, p) in r.out.iter().take(5) {
        let seg = &p[34..];
        assert_eq!(
            tcp_checksum(ip(0, 1), ip(1, 1), seg),
            0,
            "TCP checksum stays valid: {p:02x?}"
        );
    }
}
