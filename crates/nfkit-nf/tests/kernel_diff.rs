//! The same packets give the same results, packets and map contents in the
//! VM and in the Linux kernel (BPF_PROG_TEST_RUN through `bpftool prog
//! run`). Needs root and bpffs, as CI has; everything pinned is removed
//! again, also when a check fails.
//!
//! The kernel side is the caller compiled together with the NF's module
//! (`clang -include nf/<module>.c -DNF_CALLER_TARGET=nf_<name>
//! src/caller.c`), so the kernel verifies and runs the catalogue source
//! itself; the VM side links the embedded objects (tests/common).

mod common;

use common::*;
use nfkit_nf::caller;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The NF loaded in the kernel, pinned under bpffs; removed on drop.
struct KernelNf {
    progs: PathBuf,
    maps: PathBuf,
    tmp: PathBuf,
    /// The pinned time last written (saves a bpftool run per packet).
    clock: std::cell::Cell<Option<u64>>,
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed (these tests need root, bpffs and bpftool): {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hex_args(bytes: &[u8]) -> Vec<String> {
    bytes.iter().map(|b| format!("0x{b:02x}")).collect()
}

fn bytes_of(v: &Value) -> Vec<u8> {
    v.as_array()
        .expect("byte array")
        .iter()
        .map(|b| {
            u8::from_str_radix(b.as_str().expect("hex").trim_start_matches("0x"), 16)
                .expect("hex byte")
        })
        .collect()
}

impl KernelNf {
    fn for_hook(module: &str, name: &str, hook: nfkit_nf::Hook) -> KernelNf {
        if !Path::new("/sys/fs/bpf").join(".").exists() || !is_bpffs_mounted() {
            let _ = Command::new("mount")
                .args(["-t", "bpf", "bpf", "/sys/fs/bpf"])
                .status();
        }
        let tag = format!("nfkit-nf-diff-{}-{name}-{hook}", std::process::id());
        let tmp = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).expect("temp dir");
        let k = KernelNf {
            progs: PathBuf::from("/sys/fs/bpf").join(&tag),
            maps: PathBuf::from("/sys/fs/bpf").join(format!("{tag}-maps")),
            tmp,
            clock: std::cell::Cell::new(None),
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let arch = run(Command::new("uname").arg("-m")).trim().to_string();
        let obj = k.tmp.join("nf.o");
        run(
            Command::new(std::env::var("CLANG").unwrap_or_else(|_| "clang".into()))
                .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3"])
                .arg(format!("-D{}", hook.define()))
                .arg(format!("-DNF_CALLER_TARGET=nf_{name}"))
                .arg("-I")
                .arg(root.join("nf/include"))
                .arg(format!("-I/usr/include/{arch}-linux-gnu"))
                .arg("-include")
                .arg(root.join(format!("nf/{}.c", module.trim_start_matches("nf."))))
                .arg("-c")
                .arg(root.join("crates/nfkit-nf/src/caller.c"))
                .arg("-o")
                .arg(&obj),
        );
        run(Command::new("bpftool")
            .args(["prog", "loadall"])
            .arg(&obj)
            .arg(&k.progs)
            .arg("pinmaps")
            .arg(&k.maps));
        k
    }

    fn map_path(&self, map: &str) -> PathBuf {
        self.maps.join(map)
    }

    fn update(&self, map: &str, key: &[u8], value: &[u8]) {
        run(Command::new("bpftool")
            .args(["map", "update", "pinned"])
            .arg(self.map_path(map))
            .arg("key")
            .args(hex_args(key))
            .arg("value")
            .args(hex_args(value)));
    }

    fn set_clock(&self, now: u64) {
        if self.clock.replace(Some(now)) == Some(now) {
            return;
        }
        let cfg = nfkit_abi::NfConfig {
            rand_seed: 7,
            ..nfkit_abi::NfConfig::default()
        }
        .pinned_at(now)
        .to_bytes();
        self.update("nfkit_config", &0u32.to_le_bytes(), &cfg);
    }

    /// Runs the NF on `pkt`: its 64-bit result (from the caller's map: the
    /// test run's return value keeps only 32 bits) and the packet after.
    fn call(&self, pkt: &[u8], args: [u64; 4]) -> (u64, Vec<u8>) {
        self.update(
            caller::CALL_ARGS_MAP,
            &0u32.to_le_bytes(),
            &caller::encode_args(args),
        );
        let din = self.tmp.join("in.bin");
        let dout = self.tmp.join("out.bin");
        std::fs::write(&din, pkt).expect("packet file");
        run(Command::new("bpftool")
            .args(["prog", "run", "pinned"])
            .arg(self.progs.join(caller::CALL_ENTRY))
            .arg("data_in")
            .arg(&din)
            .arg("data_out")
            .arg(&dout));
        let out = std::fs::read(&dout).expect("data_out");
        let j: Value = serde_json::from_str(&run(Command::new("bpftool")
            .args(["-j", "map", "lookup", "pinned"])
            .arg(self.map_path(caller::CALL_ARGS_MAP))
            .arg("key")
            .args(hex_args(&0u32.to_le_bytes()))))
        .expect("JSON");
        let ran: Vec<Vec<u8>> = j["values"]
            .as_array()
            .expect("per-CPU values")
            .iter()
            .map(|v| bytes_of(&v["value"]))
            .filter(|v| u64_at(v, 40) == 1)
            .collect();
        assert_eq!(ran.len(), 1, "exactly one CPU ran the caller");
        (u64_at(&ran[0], 32), out)
    }

    fn dump(&self, map: &str) -> Entries {
        let j: Value = serde_json::from_str(&run(Command::new("bpftool")
            .args(["-j", "map", "dump", "pinned"])
            .arg(self.map_path(map))))
        .expect("JSON");
        let mut e: Entries = j
            .as_array()
            .expect("entries")
            .iter()
            .map(|x| (bytes_of(&x["key"]), bytes_of(&x["value"])))
            .collect();
        e.sort();
        e
    }
}

fn is_bpffs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"))
        })
        .unwrap_or(false)
}

impl Drop for KernelNf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.progs);
        let _ = std::fs::remove_dir_all(&self.maps);
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// One packet of a scenario: the time, the packet, the arguments.
struct Step {
    now: u64,
    pkt: Vec<u8>,
    args: [u64; 4],
}

fn step(now: u64, pkt: Vec<u8>, args: [u64; 4]) -> Step {
    Step { now, pkt, args }
}

/// Runs `steps` in the VM and in the kernel after the same map `setup`;
/// results, packets and the contents of `maps` must agree. Returns the
/// results for the caller's own checks.
fn differential(
    module: &str,
    name: &str,
    setup: &[(&str, Vec<u8>, Vec<u8>)],
    steps: &[Step],
    maps: &[&str],
) -> Vec<u64> {
    differential_on(nfkit_nf::Hook::Xdp, module, name, setup, steps, maps)
}

/// [`differential`] for the build of `hook`.
fn differential_on(
    hook: nfkit_nf::Hook,
    module: &str,
    name: &str,
    setup: &[(&str, Vec<u8>, Vec<u8>)],
    steps: &[Step],
    maps: &[&str],
) -> Vec<u64> {
    let vm = Harness::new(module, name, hook);
    let k = KernelNf::for_hook(module, name, hook);
    for (map, key, value) in setup {
        vm.map(map).update(key, value, 0).expect("VM map update");
        k.update(map, key, value);
    }
    let mut results = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        vm.set_clock(s.now);
        k.set_clock(s.now);
        let (rv, pv) = vm.call_pkt(&s.pkt, s.args);
        let (rk, pk) = k.call(&s.pkt, s.args);
        assert_eq!(
            rv, rk,
            "{module}.{name} step {i}: VM {rv:#x}, kernel {rk:#x}"
        );
        assert_eq!(pv, pk, "{module}.{name} step {i}: packets differ");
        results.push(rv);
    }
    for m in maps {
        let mut in_vm = vm.map(m).entries();
        in_vm.sort();
        assert_eq!(in_vm, k.dump(m), "{module}.{name}: map {m} differs");
    }
    results
}

const C1: [u8; 4] = [198, 18, 0, 1];
const S1: [u8; 4] = [198, 19, 0, 1];
const SEC: u64 = 1_000_000_000;

fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    v4(src, dst, UDP, &udp(sport, dport))
}

fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    v4(src, dst, TCP, &tcp(sport, dport, flags))
}

#[test]
fn token_bucket_agrees_with_the_kernel() {
    let mut steps = Vec::new();
    for t in [
        0,
        0,
        0,
        0,
        SEC / 10,
        SEC / 10,
        SEC / 4,
        100 * SEC,
        100 * SEC,
    ] {
        steps.push(step(t, udp4(C1, S1, 1, 2), args2(10, 3)));
        steps.push(step(t, v6(a6(1), a6(2), UDP, &udp(1, 2)), args2(10, 3)));
    }
    steps.push(step(SEC, udp4(C1, S1, 1, 2), args2(0, 3)));
    let r = differential("nf.meter", "tb_dst", &[], &steps, &["nf_meter_tb_dst"]);
    assert_eq!(r[..8], [0, 0, 0, 0, 0, 0, 1, 1]);
}

#[test]
fn conntrack_agrees_with_the_kernel() {
    let c = |f| tcp4(C1, S1, 40000, 80, f);
    let s = |f| tcp4(S1, C1, 80, 40000, f);
    let steps: Vec<Step> = [
        c(ACK),
        c(SYN),
        s(ACK),
        s(SYN | ACK),
        c(ACK),
        s(ACK),
        c(SYN),
        c(FIN | ACK),
        s(FIN | ACK),
        c(SYN),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, p)| step(i as u64 * SEC, p, NOARGS))
    .chain([
        step(20 * SEC, udp4(C1, S1, 5, 53), NOARGS),
        step(21 * SEC, udp4(S1, C1, 53, 5), NOARGS),
        step(200 * SEC, tcp4(C1, S1, 1, 2, SYN), NOARGS),
        step(300 * SEC, tcp4(S1, C1, 2, 1, SYN | ACK), NOARGS),
    ])
    .collect();
    let r = differential("nf.firewall", "conntrack", &[], &steps, &["nf_firewall_ct"]);
    assert_eq!(r[..6], [3, 1, 0x103, 0x102, 2, 0x102]);
}

#[test]
fn sets_sampling_and_timing_agree_with_the_kernel() {
    let p = udp4(C1, S1, 1, 2);
    let q = udp4(S1, C1, 2, 1);
    let steps = vec![
        step(10, p.clone(), args2(1, 100)),
        step(50, q.clone(), args2(0, 0)),
        step(60, p.clone(), args2(3, 100)),
        step(159, p.clone(), args2(0, 0)),
        step(160, p.clone(), args2(0, 0)),
        step(170, q.clone(), args2(1, 0)),
        step(180, q.clone(), args2(7, 0)),
        step(190, q.clone(), args2(2, 0)),
    ];
    let r = differential("nf.sets", "src_set", &[], &steps, &["nf_sets_src"]);
    assert_eq!(r, [0, 0, 1, 1, 0, 0, 0, 1]);

    let steps: Vec<Step> = (0..7)
        .map(|i| step(i, if i % 3 == 0 { q.clone() } else { p.clone() }, args1(2)))
        .collect();
    differential("nf.sample", "one_in", &[], &steps, &["nf_sample_flows"]);

    let steps: Vec<Step> = [0, 1000, 1500, 900, 5000]
        .into_iter()
        .map(|t| step(t * 1000, p.clone(), NOARGS))
        .collect();
    differential("nf.monitor", "last_seen", &[], &steps, &["nf_monitor_last"]);
    differential("nf.monitor", "flow_rate", &[], &steps, &["nf_monitor_rate"]);
}

#[test]
fn marking_agrees_with_the_kernel_and_keeps_checksums_valid() {
    let p4 = v4_full(C1, S1, TCP, 0x03, 64, &tcp(1, 2, ACK));
    let p6 = v6_full(a6(1), a6(2), UDP, 0x2a, 9, &udp(1, 2));
    for (name, vals) in [
        ("set_dscp", [0u64, 46, 63, 64]),
        ("set_ecn", [0, 1, 3, 4]),
        ("set_ttl", [0, 1, 255, 256]),
    ] {
        let steps: Vec<Step> = vals
            .iter()
            .flat_map(|&v| {
                [
                    step(0, p4.clone(), args1(v)),
                    step(0, p6.clone(), args1(v)),
                    step(0, arp(), args1(v)),
                ]
            })
            .collect();
        differential("nf.mark", name, &[], &steps, &[]);
    }
}

#[test]
fn routing_acl_and_parsing_agree_with_the_kernel() {
    let mut route = 24u32.to_le_bytes().to_vec();
    route.extend([198, 19, 0, 0]);
    let mut host = 32u32.to_le_bytes().to_vec();
    host.extend(S1);
    let nh = |i: u32, f: u32| {
        let mut v = i.to_le_bytes().to_vec();
        v.extend(f.to_le_bytes());
        v.extend([2, 0xdd, 0, 0, 0, 1, 2, 0x55, 0, 0, 0, 1]);
        v
    };
    let setup = vec![
        ("nf_route_v4", route, nh(3, 0)),
        ("nf_route_v4", host, nh(4, 1)),
    ];
    let steps = vec![
        step(0, udp4(C1, S1, 1, 2), NOARGS),
        step(0, udp4(C1, [198, 19, 0, 9], 1, 2), NOARGS),
        step(0, udp4(C1, [198, 20, 0, 9], 1, 2), NOARGS),
        step(0, v6(a6(1), a6(2), UDP, &udp(1, 2)), NOARGS),
    ];
    assert_eq!(
        differential("nf.route", "lpm_lookup", &setup, &steps, &["nf_route_v4"]),
        [4, 3, 0, 0]
    );
    differential("nf.route", "forward", &setup, &steps, &[]);

    let mut rule = Vec::new();
    rule.extend(mapped([198, 18, 0, 0]));
    let mut m = [0xffu8; 16];
    m[14] = 0;
    m[15] = 0;
    rule.extend(m);
    rule.extend([0u8; 32]);
    for p in [0u16, 65535, 22, 22] {
        rule.extend(p.to_le_bytes());
    }
    rule.extend([TCP, 1, 0, 0, 0, 0, 0, 0]);
    rule.extend(DROP.to_le_bytes());
    let setup = vec![("nf_firewall_acl", 0u32.to_le_bytes().to_vec(), rule)];
    let steps = vec![
        step(0, tcp4(C1, S1, 1, 22, SYN), NOARGS),
        step(0, tcp4(C1, S1, 1, 23, SYN), NOARGS),
        step(0, tcp4(S1, C1, 1, 22, SYN), NOARGS),
    ];
    assert_eq!(
        differential("nf.firewall", "acl", &setup, &steps, &[]),
        [DROP, 0, 0]
    );

    let pkts = [
        v4_full(C1, S1, TCP, 46 << 2, 64, &tcp(40000, 443, SYN)),
        vlan(&v6(a6(1), a6(2), UDP, &udp(5353, 53)), 3),
        arp(),
    ];
    for name in [
        "ip_version",
        "l4_proto",
        "src_port",
        "dst_port",
        "dscp",
        "pkt_len",
    ] {
        let steps: Vec<Step> = pkts.iter().map(|p| step(0, p.clone(), NOARGS)).collect();
        differential("nf.parse", name, &[], &steps, &[]);
    }
}

// The VM has no bpf_skb_load_bytes_relative (socket filters) and no
// bpf_csum_update (TC marking of IPv6): these builds are checked in the
// kernel alone, against expected values.

#[test]
fn socket_filter_builds_parse_in_the_kernel() {
    let p4 = v4_full(C1, S1, TCP, 46 << 2, 64, &tcp(40000, 443, SYN));
    let p6 = v6_full(a6(1), a6(2), UDP, 10 << 2, 64, &udp(5353, 53));
    for (name, w4, w6) in [
        ("ip_version", 4, 6),
        ("l4_proto", 6, 17),
        ("src_port", 40000, 5353),
        ("dst_port", 443, 53),
        ("dscp", 46, 10),
        ("pkt_len", p4.len() as u64 - 14, p6.len() as u64 - 14),
    ] {
        let k = KernelNf::for_hook("nf.parse", name, nfkit_nf::Hook::Socket);
        k.set_clock(0);
        assert_eq!(k.call(&p4, NOARGS).0, w4, "{name} IPv4");
        assert_eq!(k.call(&p6, NOARGS).0, w6, "{name} IPv6");
    }
    let k = KernelNf::for_hook("nf.firewall", "conntrack", nfkit_nf::Hook::Socket);
    k.set_clock(0);
    assert_eq!(k.call(&tcp4(C1, S1, 1, 2, SYN), NOARGS).0, 1);
    assert_eq!(k.call(&tcp4(S1, C1, 2, 1, SYN | ACK), NOARGS).0, 0x102);
}

#[test]
fn tc_marking_in_the_kernel_matches_xdp_marking_in_the_vm() {
    let p4 = v4_full(C1, S1, TCP, 0x03, 64, &tcp(1, 2, ACK));
    let p6 = v6_full(a6(1), a6(2), UDP, 0x2a, 9, &udp(1, 2));
    for (name, v) in [("set_dscp", 46u64), ("set_ecn", 2), ("set_ttl", 1)] {
        let k = KernelNf::for_hook("nf.mark", name, nfkit_nf::Hook::Tc);
        k.set_clock(0);
        let vm = Harness::xdp("nf.mark", name);
        for p in [&p4, &p6] {
            let (rk, pk) = k.call(p, args1(v));
            let (rv, pv) = vm.call_pkt(p, args1(v));
            assert_eq!((rk, &pk), (rv, &pv), "{name}");
        }
        let (_, pk) = k.call(&p4, args1(v));
        assert!(ipv4_checksum_ok(&pk, 14), "{name}");
    }
}

#[test]
fn tc_builds_agree_with_the_kernel() {
    let tc = nfkit_nf::Hook::Tc;
    let pkts = [
        v4_full(C1, S1, TCP, 46 << 2, 64, &tcp(40000, 443, SYN)),
        vlan(&v6(a6(1), a6(2), UDP, &udp(5353, 53)), 3),
        arp(),
    ];
    for name in [
        "ip_version",
        "l4_proto",
        "src_port",
        "dst_port",
        "dscp",
        "pkt_len",
    ] {
        let steps: Vec<Step> = pkts.iter().map(|p| step(0, p.clone(), NOARGS)).collect();
        differential_on(tc, "nf.parse", name, &[], &steps, &[]);
    }
    let c = |f| tcp4(C1, S1, 40000, 80, f);
    let s = |f| tcp4(S1, C1, 80, 40000, f);
    let steps: Vec<Step> = [c(SYN), s(SYN | ACK), c(ACK), s(RST), c(ACK)]
        .into_iter()
        .map(|p| step(0, p, NOARGS))
        .collect();
    let r = differential_on(
        tc,
        "nf.firewall",
        "conntrack",
        &[],
        &steps,
        &["nf_firewall_ct"],
    );
    assert_eq!(r, [1, 0x102, 2, 0x102, 3]);
    let steps: Vec<Step> = (0..5)
        .map(|i| step(i * SEC / 2, udp4(C1, S1, 1, 2), args2(1, 2)))
        .collect();
    let r = differential_on(
        tc,
        "nf.meter",
        "tb_srcdst",
        &[],
        &steps,
        &["nf_meter_tb_srcdst"],
    );
    assert_eq!(r, [0, 0, 0, 1, 0], "1 token/s, 2 deep, every 0.5 s");
}
