//! Shared by the tests: packet builders and compile-and-run helpers.
#![allow(dead_code)]

use nfkit_control::runner::{Outcome, Report, ScriptVm};
use nfkit_lang::{compile, Compiled, Options};
use std::path::{Path, PathBuf};

// nfkit-kernel's test support (the root check), the same file.
#[path = "../../../nfkit-kernel/tests/common/mod.rs"]
mod kernel;
#[allow(unused_imports)]
pub use kernel::is_root;

pub const XDP_ABORTED: u64 = 0;
pub const XDP_DROP: u64 = 1;
pub const XDP_PASS: u64 = 2;
pub const XDP_TX: u64 = 3;
pub const XDP_REDIRECT: u64 = 4;

/// An Ethernet + IPv4 + UDP frame (valid IPv4 checksum), `payload` after
/// the UDP header.
pub fn udp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    tos: u8,
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let tot = 20 + 8 + payload.len();
    let mut ip = vec![0x45, tos];
    ip.extend_from_slice(&(tot as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, ttl, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// The IPv4 header checksum of `h` (its checksum field taken as is).
pub fn checksum(h: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for w in h.chunks(2) {
        s += ((w[0] as u32) << 8) | *w.get(1).unwrap_or(&0) as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

pub fn build(src: &str) -> Compiled {
    match compile("test.py", src, &Options::default()) {
        Ok(c) => c,
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

pub fn load(src: &str) -> (Compiled, ScriptVm) {
    let c = build(src);
    let vm = match ScriptVm::new(&c) {
        Ok(v) => v,
        Err(e) => panic!("load failed: {e}\n{}", nfkit_lang::listing::listing(&c)),
    };
    (c, vm)
}

pub fn run(vm: &mut ScriptVm, frame: &[u8]) -> Outcome {
    run_at(vm, frame, 1_000_000_000)
}

pub fn run_at(vm: &mut ScriptVm, frame: &[u8], now: u64) -> Outcome {
    let (o, _) = vm.run(frame, now, false).expect("run");
    assert!(o.error.is_none(), "VM error: {:?}", o.error);
    o
}

/// Map contents as (key, value) pairs.
pub fn map(c: &Compiled, vm: &ScriptVm, name: &str) -> Vec<(u64, u64)> {
    vm.maps(&c.program)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// Ones' complement sum of 16-bit big-endian words.
pub fn ones(data: &[u8], mut s: u32) -> u32 {
    for w in data.chunks(2) {
        s += ((w[0] as u32) << 8) | *w.get(1).unwrap_or(&0) as u32;
    }
    s
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The TCP checksum of the segment `seg` between `src` and `dst`.
pub fn tcp_checksum(src: [u8; 4], dst: [u8; 4], seg: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    fold(ones(seg, ones(&pseudo, 0)))
}

/// An Ethernet + IPv4 + TCP frame with `options` (padded to 4 bytes),
/// correct IPv4 and TCP checksums.
pub fn tcp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    flags: u8,
    options: &[u8],
) -> Vec<u8> {
    let mut opts = options.to_vec();
    while !opts.len().is_multiple_of(4) {
        opts.push(0);
    }
    let mut seg = Vec::new();
    seg.extend_from_slice(&sport.to_be_bytes());
    seg.extend_from_slice(&dport.to_be_bytes());
    seg.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    seg.push((((20 + opts.len()) / 4) as u8) << 4);
    seg.push(flags);
    seg.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    seg.extend_from_slice(&opts);
    let c = tcp_checksum(src, dst, &seg);
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&((20 + seg.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&seg);
    f
}

/// Loads `c` into the kernel, applies the control plane, and runs every
/// packet with `BPF_PROG_TEST_RUN` (clock pinned to its timestamp):
/// (return value, packet afterwards) per packet.
pub fn kernel_run(c: &Compiled, packets: &[(u64, Vec<u8>)]) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let entry = c.entry().ok_or("no entry")?;
    kernel_run_image(&c.image, entry, &c.control_plane(), packets)
}

/// Loads `image` whole, applies `writes`, and test-runs program `entry`
/// on each packet with the clock pinned to its timestamp.
#[allow(dead_code)]
pub fn kernel_run_image(
    image: &nfkit_object::Image,
    entry: &str,
    writes: &[(String, Vec<u8>, Vec<u8>)],
    packets: &[(u64, Vec<u8>)],
) -> Result<Vec<(u64, Vec<u8>)>, String> {
    use nfkit_kernel::{load_image, LoadOptions, TestRun};
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let loaded = load_image(image, &LoadOptions::default()).map_err(|e| format!("{e}"))?;
    for (m, k, v) in writes {
        let map = loaded.map(m).ok_or(format!("no map {m}"))?;
        map.update(k, v, 0).map_err(|e| format!("{m}: {e}"))?;
    }
    let prog = loaded.prog(entry).ok_or("no prog")?;
    let cfg = loaded.map("nfkit_config").ok_or("no nfkit_config")?;
    let mut out = Vec::new();
    for (ts, data) in packets {
        let old = cfg.lookup(&0u32.to_le_bytes()).map_err(|e| e.to_string())?;
        let v = old
            .as_deref()
            .and_then(nfkit_abi::NfConfig::from_bytes)
            .unwrap_or_default()
            .pinned_at(*ts)
            .to_bytes();
        cfg.update(&0u32.to_le_bytes(), &v, 0)
            .map_err(|e| e.to_string())?;
        let r = prog
            .test_run(&TestRun::packet(data))
            .map_err(|e| e.to_string())?;
        out.push((r.retval as u64, r.data));
    }
    Ok(out)
}

/// The examples in `examples/` that have a pcap.
pub const EXAMPLES: [&str; 5] = [
    "ddos",
    "dscp_dispatch",
    "flow_limiter",
    "tcp_options",
    "port_stats",
];

/// The repository's `examples/`.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// `examples/NAME.py` and the packets of `examples/NAME.pcap` as
/// (timestamp, frame).
pub fn example(name: &str) -> (String, Vec<(u64, Vec<u8>)>) {
    let dir = examples_dir();
    let src = std::fs::read_to_string(dir.join(format!("{name}.py"))).expect("script");
    let input = nfkit_pcap::read_file(dir.join(format!("{name}.pcap")))
        .expect("pcap")
        .into_iter()
        .map(|p| (p.ts_ns, p.data))
        .collect();
    (src, input)
}

/// Asserts that the kernel's (return value, packet) per packet, `k`, has
/// the VM run's verdicts, and that the packets it passed, sent back or
/// redirected are the VM's output packets. `what` names the kernel side
/// in the messages.
pub fn assert_kernel_matches(name: &str, what: &str, vm: &Report, k: &[(u64, Vec<u8>)]) {
    for (i, (l, (code, _))) in vm.lines.iter().zip(k).enumerate() {
        assert_eq!(
            l.code,
            *code,
            "{name}: packet {} verdict (VM {} / {what} {code})",
            i + 1,
            l.verdict
        );
    }
    let kept: Vec<&Vec<u8>> = k
        .iter()
        .filter(|(c, _)| (2..=4).contains(c))
        .map(|(_, d)| d)
        .collect();
    let vm_out: Vec<&Vec<u8>> = vm.out.iter().map(|(_, d)| d).collect();
    assert_eq!(vm_out, kept, "{name}: output packets");
}

/// Slots `0..n` of an array map of `u64` values, read through `lookup`
/// (a missing or short value fails the test).
pub fn u64_slots(n: u32, lookup: impl Fn(&[u8]) -> Option<Vec<u8>>) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let v = lookup(&i.to_le_bytes()).unwrap_or_else(|| panic!("no slot {i}"));
            let b: [u8; 8] = v
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .unwrap_or_else(|| panic!("slot {i}: {} bytes", v.len()));
            u64::from_le_bytes(b)
        })
        .collect()
}
