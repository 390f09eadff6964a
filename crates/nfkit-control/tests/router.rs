//! `examples/router.py`, the match-action pipeline example (an LPM routes
//! table, a ternary ACL with a rate-limiting extern, `pre` and `post`
//! positions): its pcap (generated here, NFKIT_BLESS=1 rewrites it and the
//! expected report) gives the behaviour the script describes in the VM on
//! both engines, and the kernel (`BPF_PROG_TEST_RUN` of the XDP program)
//! gives the VM's verdict and bytes for every packet.

mod common;
use common::*;
use nfkit_control::runner::{run_capture_on, Report};
use nfkit_lang::{compile, Options};
use nfkit_pcap::Packet;
use nfkit_vm::Engine;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn ip(a: u8, b: u8) -> [u8; 4] {
    [198, 18, a, b]
}

/// What the router must do with each packet: (verdict, output port).
const WANT: [(&str, u32); 11] = [
    ("REDIRECT", 2), // 198.18.1.5: routed to port 2
    ("REDIRECT", 3), // 198.18.2.7: port 3
    ("REDIRECT", 2), // 198.18.2.200: the /25 wins, port 2
    ("DROP", 0),     // 198.18.3.1: no route
    ("REDIRECT", 2), // DNS: permitted by the ACL
    ("DROP", 0),     // UDP 123 from 198.18.0.0/24: ACL drop (ternary mask)
    ("DROP", 0),     // telnet: ACL drop
    ("REDIRECT", 2), // ssh: permitted (default NoAction)
    ("DROP", 0),     // TTL 1: pre drops
    ("DROP", 0),     // ARP: pre drops
    ("REDIRECT", 3), // the first of the rate-limited source's packets
];

/// The example's packets: the cases of [`WANT`] 1 ms apart, then 11 more
/// packets of the rate-limited source 1 ms apart (burst 5: 4 more pass).
pub fn router_packets() -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    let udp = |dst: [u8; 4], dport: u16, ttl: u8| udp4(ip(0, 10), dst, 4000, dport, 0, ttl, b"r");
    v.push(udp(ip(1, 5), 5000, 64));
    v.push(udp(ip(2, 7), 5000, 64));
    v.push(udp(ip(2, 200), 5000, 64));
    v.push(udp(ip(3, 1), 5000, 64));
    v.push(udp(ip(1, 5), 53, 64));
    v.push(udp(ip(1, 5), 123, 64));
    v.push(tcp4(ip(5, 5), ip(1, 5), 3000, 23, 0x02, &[]));
    v.push(tcp4(ip(5, 5), ip(1, 5), 3000, 22, 0x02, &[]));
    v.push(udp(ip(1, 5), 5000, 1));
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    v.push(arp);
    for _ in 0..12 {
        v.push(udp4(ip(0, 66), ip(2, 7), 4000, 5000, 0, 64, b"flood"));
    }
    v.into_iter()
        .enumerate()
        .map(|(i, p)| (S + i as u64 * MS, p))
        .collect()
}

fn run(engine: Engine) -> (nfkit_lang::Compiled, Report, Vec<(u64, Vec<u8>)>) {
    let d = examples_dir();
    let pcap = d.join("router.pcap");
    if std::env::var_os("NFKIT_BLESS").is_some() || !pcap.exists() {
        let pk: Vec<Packet> = router_packets()
            .into_iter()
            .map(|(t, b)| Packet::new(t, b))
            .collect();
        nfkit_pcap::write_file(&pcap, &pk).expect("write pcap");
    }
    let (src, input) = example("router");
    assert_eq!(
        input,
        router_packets(),
        "router.pcap is what the generator makes"
    );
    let c =
        compile("examples/router.py", &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let r = run_capture_on(&c, &input, false, engine).expect("run");
    (c, r, input)
}

#[test]
fn router_routes_filters_and_rate_limits_as_described() {
    for engine in [Engine::Interp, Engine::Jit] {
        let (_c, r, input) = run(engine);
        let got: Vec<(&str, u32)> = r
            .lines
            .iter()
            .map(|l| (l.verdict.as_str(), l.redirect.unwrap_or(0)))
            .collect();
        assert_eq!(&got[..WANT.len()], &WANT[..], "{engine:?}");
        let limited: Vec<(&str, u32)> = got[WANT.len() - 1..].to_vec();
        let passed = limited.iter().filter(|v| **v == ("REDIRECT", 3)).count();
        assert_eq!(passed, 5, "burst 5 of the rate-limited source: {limited:?}");
        assert!(limited[5..].iter().all(|v| v.0 == "DROP"), "{limited:?}");
        // Routed frames: next-hop MAC, router MAC, TTL - 1, valid checksum.
        let routed: Vec<(usize, &Vec<u8>)> = r.out.iter().map(|(_, p)| p).enumerate().collect();
        assert_eq!(routed.len(), 5 + 5, "{engine:?}: output frames");
        for (_, p) in &routed {
            let port = if p[5] == 0x01 && p[4] == 0x03 { 3 } else { 2 };
            assert_eq!(&p[..6], &[0x02, 0, 0, 0, port, 0x01]);
            assert_eq!(&p[6..12], &[0x02, 0, 0, 0, 0, 0xfe]);
            assert_eq!(p[22], 63, "TTL decremented");
            assert_eq!(checksum(&p[14..34]), 0, "IPv4 checksum stays valid");
        }
        // pre's counters: one non-IPv4, one TTL expired, 7 rate-limited.
        let stats = &r.maps.iter().find(|(n, _)| n == "stats").expect("stats").1;
        let get = |k: u64| stats.iter().find(|(x, _)| *x == k).map_or(0, |e| e.1);
        assert_eq!((get(0), get(1), get(2)), (1, 1, 7), "{engine:?}");
        assert_eq!(input.len(), r.lines.len());
    }
}

#[test]
fn router_kernel_gives_the_vm_verdicts_and_bytes() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (c, vm, input) = run(Engine::Interp);
    let k = kernel_run(&c, &input).expect("kernel run");
    assert_kernel_matches("router", "kernel XDP", &vm, &k);
}

/// Exact and LPM-with-exact tables, a chain between tables, and a table
/// applied from a chain: the same results in the VM and the kernel.
const LAYOUTS: &str = r#"
from nf.classify import every_packet

def mark(arg: u64) -> u64:
    return arg

BY_PROTO = Table(keys={"ip.proto": "exact", "l4.dport": "exact"},
                 actions=[mark, DROP], size=16, default=(mark, 0),
                 entries=[((17, 53), mark, 7), ((6, 23), DROP)])
BY_NET = Table(keys={"ip.proto": "exact", "ip.dst": "lpm"},
               actions=[REDIRECT, PASS], size=16, default=PASS,
               entries=[((17, "198.18.1.0/24"), REDIRECT, 3), ((17, "198.18.1.128/25"), REDIRECT, 4)])

def main() -> u64:
    m: u64 = BY_PROTO.apply()
    if m == 7:
        return TX
    return BY_NET.apply()

every_packet(main)
"#;

#[test]
fn exact_and_lpm_tables_match_in_the_vm_and_the_kernel() {
    let c = compile("layouts.py", LAYOUTS, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let udp = |dst: [u8; 4], dport: u16| udp4(ip(0, 1), dst, 1000, dport, 0, 64, b"x");
    let input: Vec<(u64, Vec<u8>)> = [
        udp(ip(1, 5), 53),                       // BY_PROTO mark 7: TX
        tcp4(ip(0, 1), ip(1, 5), 1, 23, 2, &[]), // DROP
        udp(ip(1, 5), 80),                       // /24: REDIRECT 3
        udp(ip(1, 200), 80),                     // /25: REDIRECT 4
        udp(ip(2, 1), 80),                       // miss: PASS
        tcp4(ip(0, 1), ip(1, 5), 1, 80, 2, &[]), // proto 6: PASS
    ]
    .into_iter()
    .enumerate()
    .map(|(i, p)| (S + i as u64 * MS, p))
    .collect();
    let vm = run_capture_on(&c, &input, false, Engine::Interp).expect("run");
    let got: Vec<(&str, u32)> = vm
        .lines
        .iter()
        .map(|l| (l.verdict.as_str(), l.redirect.unwrap_or(0)))
        .collect();
    assert_eq!(
        got,
        [
            ("TX", 0),
            ("DROP", 0),
            ("REDIRECT", 3),
            ("REDIRECT", 4),
            ("PASS", 0),
            ("PASS", 0)
        ]
    );
    if nfkit_kernel::is_root() {
        let k = kernel_run(&c, &input).expect("kernel run");
        assert_kernel_matches("layouts", "kernel XDP", &vm, &k);
    }
}

/// The `post` position for the kernel: the post program of a pipeline,
/// compiled for TC (egress), passes the verifier and gives, on every
/// frame the ingress program routed, the verdict the VM's post program
/// gives (PASS, or DROP for frames to 198.18.2.9 leaving port 3).
const POST: &str = r#"
from nf.classify import every_packet

def post() -> u64:
    if Packet.read_u8(14 + 19) == 9 and Packet.read_u8(14 + 18) == 2:
        return DROP
    return PASS

def route(port: u64) -> u64:
    return port

ROUTES = Table(keys={"ip.dst": "lpm"}, actions=[route, DROP], size=16, default=DROP,
               entries=[("198.18.1.0/24", route, 2), ("198.18.2.0/24", route, 3)])

pipeline(tables=[ROUTES], post=post)
"#;

#[test]
fn post_program_runs_at_tc_with_the_vm_verdicts() {
    let ingress = compile("post.py", POST, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let tc = Options {
        hook: Some(nfkit_nf::Hook::Tc),
        ..Options::default()
    };
    let post = nfkit_lang::pipeline::post_of(&ingress, &tc)
        .expect("post compiles")
        .expect("the script has post");
    assert_eq!(post.hook, nfkit_nf::Hook::Tc);
    let input: Vec<(u64, Vec<u8>)> = [
        [198, 18, 1, 1],
        [198, 18, 2, 1],
        [198, 18, 2, 9],
        [198, 18, 1, 9],
    ]
    .into_iter()
    .enumerate()
    .map(|(i, d)| (S + i as u64 * MS, udp4(ip(0, 1), d, 1, 2, 0, 64, b"p")))
    .collect();
    let routed = run_capture_on(&ingress, &input, false, Engine::Interp).expect("run");
    let ports: Vec<u32> = routed
        .lines
        .iter()
        .map(|l| l.redirect.unwrap_or(0))
        .collect();
    assert_eq!(ports, [2, 3, 3, 2]);
    let vm = run_capture_on(&post, &input, false, Engine::Interp).expect("run post");
    let verdicts: Vec<&str> = vm.lines.iter().map(|l| l.verdict.as_str()).collect();
    assert_eq!(verdicts, ["PASS", "PASS", "DROP", "PASS"]);
    if nfkit_kernel::is_root() {
        // TC return codes (TC_ACT_OK 0, TC_ACT_SHOT 2), equal to the VM's
        // for the TC hook; the bytes unchanged.
        let k = kernel_run(&post, &input).expect("kernel TC run");
        for (i, (l, (code, data))) in vm.lines.iter().zip(&k).enumerate() {
            assert_eq!(
                l.code,
                *code,
                "packet {}: VM {} / kernel {code}",
                i + 1,
                l.verdict
            );
            assert_eq!(data, &input[i].1, "packet {}", i + 1);
        }
        assert_eq!(k.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [0, 0, 2, 0]);
    }
}

/// `nfkit run` (the runner) runs `post` on every frame that leaves on a
/// port where the hook has it (TC, the switch), as the switch does: with
/// the ingress program's maps (the router's counter), a DROP there
/// keeping the frame out of the output. At XDP (the router's own
/// attach) it does not, as in the kernel.
#[test]
fn run_passes_frames_leaving_on_a_port_through_post() {
    let (_c, xdp, input) = run(Engine::Interp);
    assert!(xdp.lines.iter().all(|l| l.post.is_none()), "no post at XDP");
    let (src, _) = example("router");
    for (hook, engine) in [
        (nfkit_nf::Hook::Tc, Engine::Interp),
        (nfkit_nf::Hook::Switch, Engine::Jit),
    ] {
        let opts = Options {
            hook: Some(hook),
            ..Options::default()
        };
        let c = compile("examples/router.py", &src, &opts).unwrap_or_else(|e| panic!("{e}"));
        let r = run_capture_on(&c, &input, false, engine).expect("run");
        let routed = r.lines.iter().filter(|l| l.verdict == "REDIRECT").count();
        assert_eq!(routed, 10, "{hook:?}");
        for l in &r.lines {
            let want = (l.verdict == "REDIRECT").then(|| "PASS".to_string());
            assert_eq!(l.post, want, "{hook:?}: packet {}", l.index);
        }
        let stats = &r.maps.iter().find(|(n, _)| n == "stats").expect("stats").1;
        let counted = stats.iter().find(|(k, _)| *k == 3).map_or(0, |e| e.1);
        assert_eq!(
            counted, 10,
            "{hook:?}: post counted every routed frame in pre's map"
        );
        assert_eq!(r.out.len(), 10, "{hook:?}");
    }

    let tc = Options {
        hook: Some(nfkit_nf::Hook::Tc),
        ..Options::default()
    };
    let c = compile("post.py", POST, &tc).unwrap_or_else(|e| panic!("{e}"));
    let input: Vec<(u64, Vec<u8>)> = [[198, 18, 1, 1], [198, 18, 2, 9], [198, 18, 3, 1]]
        .into_iter()
        .enumerate()
        .map(|(i, d)| (S + i as u64 * MS, udp4(ip(0, 1), d, 1, 2, 0, 64, b"p")))
        .collect();
    for engine in [Engine::Interp, Engine::Jit] {
        let r = run_capture_on(&c, &input, false, engine).expect("run");
        let got: Vec<(&str, Option<&str>)> = r
            .lines
            .iter()
            .map(|l| (l.verdict.as_str(), l.post.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("REDIRECT", Some("PASS")),
                ("REDIRECT", Some("DROP")),
                ("DROP", None)
            ],
            "{engine:?}"
        );
        let out: Vec<u64> = r.out.iter().map(|(t, _)| *t).collect();
        assert_eq!(out, [S], "{engine:?}: only the frame post passes goes out");
    }
}

/// Default actions are map state (`T_default[0]`, the action word of a
/// miss): set with the text-level `nfkit map set` operation (key `0`,
/// value `action index << 56 | argument`), the next packets that match
/// nothing take the new action, in the VM on both engines and in the
/// kernel (the same writes after the control plane, the same results).
#[test]
fn default_actions_change_at_runtime_in_the_vm_and_the_kernel() {
    use nfkit_control::maps::access;
    use nfkit_control::runner::ScriptVm;
    let c = compile("layouts.py", LAYOUTS, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let udp = |dst: [u8; 4], dport: u16| udp4(ip(0, 1), dst, 1000, dport, 0, 64, b"x");
    let packets = [
        udp(ip(1, 5), 53),                       // BY_PROTO hit: TX
        udp(ip(1, 5), 80),                       // BY_PROTO miss, BY_NET hit: REDIRECT 3
        udp(ip(2, 1), 80),                       // both miss
        tcp4(ip(0, 1), ip(1, 5), 1, 80, 2, &[]), // both miss (BY_NET keys proto 17)
    ];
    let declared = [("TX", 0), ("REDIRECT", 3), ("PASS", 0), ("PASS", 0)];
    // BY_NET's misses REDIRECT to 9 (action 0, argument 9); then
    // BY_PROTO's misses DROP (action 1).
    let net_redirect = [("TX", 0), ("REDIRECT", 3), ("REDIRECT", 9), ("REDIRECT", 9)];
    let proto_drop = [("TX", 0), ("DROP", 0), ("DROP", 0), ("DROP", 0)];
    // (map, value as `nfkit map set` takes it, the verdicts afterwards)
    type Change<'a> = (&'a str, &'a str, &'a [(&'a str, u32)]);
    let changes: [Change; 2] = [
        ("BY_NET_default", "9", &net_redirect),
        ("BY_PROTO_default", "0x0100000000000000", &proto_drop),
    ];
    // XDP return codes and redirect targets.
    let xdp = |w: &[(&str, u32)]| -> Vec<(u64, u32)> {
        w.iter()
            .map(|&(v, port)| {
                let code = match v {
                    "DROP" => 1,
                    "PASS" => 2,
                    "TX" => 3,
                    _ => 4, // XDP_REDIRECT
                };
                (code, port)
            })
            .collect()
    };
    let verdicts = |vm: &mut ScriptVm| -> Vec<(u64, u32)> {
        packets
            .iter()
            .map(|p| {
                let o = common::run(vm, p);
                (o.code, o.redirect.unwrap_or(0))
            })
            .collect()
    };
    for engine in [Engine::Interp, Engine::Jit] {
        let mut vm = ScriptVm::new_on(&c, engine).expect("load");
        assert_eq!(verdicts(&mut vm), xdp(&declared), "{engine:?}: declared");
        for (map, value, want) in changes {
            let m = vm.map_access(map).expect("the default map is a script map");
            access::set(&m, "0", value).expect("map set");
            let row = access::get(&m, "0").expect("map get");
            let word = (if map == "BY_NET_default" {
                9u64
            } else {
                1 << 56
            })
            .to_string();
            assert!(row.text().contains(&word), "map get {map}: {}", row.text());
            assert_eq!(verdicts(&mut vm), xdp(want), "{engine:?}: after {map}");
        }
    }
    if !nfkit_kernel::is_root() {
        return;
    }
    let input: Vec<(u64, Vec<u8>)> = packets
        .iter()
        .enumerate()
        .map(|(i, p)| (S + i as u64 * MS, p.clone()))
        .collect();
    let entry = c.entry().expect("entry");
    let mut writes = c.control_plane();
    let codes_of = |w: &[(&str, u32)]| -> Vec<u64> { xdp(w).into_iter().map(|(c, _)| c).collect() };
    let codes = |writes: &[(String, Vec<u8>, Vec<u8>)]| -> Vec<u64> {
        kernel_run_image(&c.image, entry, writes, &input)
            .expect("kernel run")
            .into_iter()
            .map(|(code, _)| code)
            .collect()
    };
    assert_eq!(codes(&writes), codes_of(&declared), "kernel: declared");
    for (word, want) in [(9u64, &net_redirect), (1 << 56, &proto_drop)] {
        let map = if word == 9 {
            "BY_NET_default"
        } else {
            "BY_PROTO_default"
        };
        writes.push((
            map.to_string(),
            0u32.to_le_bytes().to_vec(),
            word.to_le_bytes().to_vec(),
        ));
        assert_eq!(
            codes(&writes),
            codes_of(want.as_slice()),
            "kernel: after {map}"
        );
    }
}

/// A table declared in a library script (`tests/scripts/lib/routes.chain`)
/// and imported (`from lib.routes import ROUTES as R`): the importing
/// script's pipeline applies it as a stage, and `R.apply()` in its own
/// chains; its maps are in the compiled object under the library's
/// names, its declared entries and default are installed, an entry
/// written at runtime takes effect; the kernel gives the VM's results.
#[test]
fn tables_of_imported_library_scripts_apply_in_the_importing_pipeline() {
    use nfkit_control::maps::access;
    use nfkit_control::runner::ScriptVm;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../nfkit-lang/tests/scripts");
    let path = dir.join("pipeline_lib.py");
    let src = std::fs::read_to_string(&path).expect("script");
    let as_stage = compile(&path.display().to_string(), &src, &Options::default())
        .unwrap_or_else(|e| panic!("{e}"));
    // The same table applied from a chain of the importing script.
    let applied = src.replace(
        "def routed() -> u64:\n    seen[1] += 1\n    return 0",
        "def routed() -> u64:\n    seen[1] += 1\n    return R.apply()",
    );
    let applied = applied.replace("tables=[R, routed]", "tables=[routed]");
    assert_ne!(applied, src);
    let in_chain = compile(
        &dir.join("apply_lib.py").display().to_string(),
        &applied,
        &Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let udp = |dst: [u8; 4]| udp4(ip(0, 1), dst, 1000, 2000, 0, 64, b"l");
    let packets = [udp(ip(1, 5)), udp(ip(2, 5)), udp(ip(3, 5)), udp(ip(4, 5))];
    for c in [&as_stage, &in_chain] {
        let names: Vec<&str> = c.image.maps.iter().map(|m| m.name.as_str()).collect();
        for m in ["ROUTES_lpm", "ROUTES_default", "seen"] {
            assert!(
                names.contains(&m),
                "{}: map {m} in {names:?}",
                c.program.file
            );
        }
        for engine in [Engine::Interp, Engine::Jit] {
            let mut vm = ScriptVm::new_on(c, engine).expect("load");
            // 198.18.4.0/24 -> port 4, written at runtime as `nfkit map
            // set` does (the LPM key as hex bytes: prefix length, address).
            let lpm = vm.map_access("ROUTES_lpm").expect("the library's map");
            access::set(&lpm, "18000000c6120400", "4").expect("map set");
            let got: Vec<(u64, u32, u8)> = packets
                .iter()
                .map(|p| {
                    let o = common::run(&mut vm, p);
                    (o.code, o.redirect.unwrap_or(0), o.packet[22])
                })
                .collect();
            assert_eq!(
                got,
                [(4, 2, 63), (4, 3, 63), (1, 0, 64), (4, 4, 63)],
                "{} {engine:?}: routed by the library's entries (TTL - 1 by its action), \
                 a miss dropped by its default",
                c.program.file
            );
            let seen = common::map(c, &vm, "seen");
            assert_eq!(seen.first(), Some(&(0, 4)), "pre ran on every packet");
        }
        if nfkit_kernel::is_root() {
            let input: Vec<(u64, Vec<u8>)> = packets
                .iter()
                .enumerate()
                .map(|(i, p)| (S + i as u64 * MS, p.clone()))
                .collect();
            let vm = run_capture_on(c, &input, false, Engine::Interp).expect("run");
            let k = kernel_run(c, &input).expect("kernel run");
            assert_kernel_matches("pipeline_lib", "kernel XDP", &vm, &k);
        }
    }
}
