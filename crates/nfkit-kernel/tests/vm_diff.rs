//! VM-versus-kernel differential runs (issue 3): every program of the C
//! corpus, and the helper programs of `tests/progs/helpers.c`, run on
//! the same generated packets in nfkit's VM and through
//! `BPF_PROG_TEST_RUN` in the running kernel; return value, packet bytes
//! afterwards (with metadata and head/tail adjustments) and every map's
//! contents must agree after each packet.
//!
//! What test runs really do, and how this test encodes it:
//! * input shorter than 14 bytes is refused (EINVAL) by XDP and skb test
//!   runs: those packets run in the VM only (no crash, no fault asserted);
//! * XDP gets 256 bytes of headroom and a linear area of at most
//!   4096 - 256 - 320 = 3520 bytes; the XDP output starts at `data_meta`;
//!   skb input longer than a page minus head- and tailroom is refused;
//! * XDP metadata comes in through the context (`xdp_md.data` = its
//!   length, every 11th frame) and goes out in front of the frame;
//! * `repeat` re-runs XDP programs on the packet as the previous run left
//!   it: every 7th packet runs 3 times, and the VM chains 3 runs likewise;
//! * redirect helpers return XDP_REDIRECT / TC_ACT_REDIRECT without
//!   checking the target;
//! * socket filters see the packet from the network header (and the
//!   test run's output still has the Ethernet header);
//! * the test thread is pinned to CPU 1 (0 on one-CPU machines); per-CPU maps are
//!   compared on that CPU (the VM runs with the same `cpu`), hash maps
//!   as sets of entries,
//!   LRU maps stay below capacity (few distinct keys);
//! * time and randomness: `tc_sample_redirect` runs with its `.rodata`
//!   `sample_every` set to 0 (no sampling: deterministic) and again with
//!   1 (every packet sampled: `prandom % 1 == 0` whatever the generator
//!   says); there the keys of `sampled_at` are compared and the values
//!   (kernel time vs. the VM's pinned clock) only checked non-zero.
//!
//! Every program runs in two VMs, one per engine (the JIT, and the
//! interpreter), each with its own maps following the kernel's: both
//! must agree with the kernel on every packet. A summary line (with the
//! counts per engine) is printed and written to
//! `target/nfkit-test-summary/kernel-diff.txt`.

use nfkit_kernel::{load_image, KMap, LoadOptions, Loaded, TestRun};
use nfkit_object::{Image, MapKind, MapType, ProgType};
use nfkit_vm::{
    Context, Engine, EngineUse, FixedClock, RunOptions, SeqRng, SkBuff, Vm, VmConfig, XdpMd,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

const PACKETS: usize = 1200;
const SEED: u64 = 0x6e66_6b69_7464_6966;
const XDP_MAX_LINEAR: usize = 4096 - 256 - 320;
const REPEAT_EVERY: usize = 7;
/// Metadata some XDP frames come with.
const META_IN: [u8; 8] = [0x6e, 0x66, 0x6b, 0x74, 1, 2, 3, 4];

/// The CPU the test thread is pinned to.
static CPU: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn cpu() -> usize {
    CPU.get().copied().unwrap_or(0)
}

// ---------------------------------------------------------------- packets

/// xorshift64*: deterministic, no dependencies.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

fn csum(data: &[u8], init: u32) -> u16 {
    let mut s = init;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        s += u32::from(w);
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const PORTS: [u16; 8] = [53, 80, 443, 8080, 22, 123, 9999, 5201];

fn eth(g: &mut Gen, ethertype: u16) -> Vec<u8> {
    let mut p = Vec::new();
    let dst: [u8; 6] = match g.below(4) {
        0 => [0xff; 6],
        1 => [0; 6],
        2 => [0x01, 0x00, 0x5e, 0, 0, 1],
        _ => [0x02, 0, 0, 0, 0, 2],
    };
    p.extend_from_slice(&dst);
    p.extend_from_slice(&[0x02, 0, 0, 0, 0, g.byte()]);
    p.extend_from_slice(&ethertype.to_be_bytes());
    p
}

fn ipv4(g: &mut Gen, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = eth(g, 0x0800);
    let opts = if g.below(6) == 0 {
        4 * g.below(3) as usize
    } else {
        0
    };
    let ihl = 5 + opts / 4;
    let total = (20 + opts + l4.len()) as u16;
    let mut ip = vec![0x40 | ihl as u8, (g.below(64) as u8) << 2];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&(g.next() as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, *g.pick(&[1u8, 2, 64, 255]), proto, 0, 0]);
    // Few distinct addresses: hash and LRU maps stay below capacity.
    ip.extend_from_slice(&[198, 18, g.below(2) as u8, g.below(24) as u8]);
    ip.extend_from_slice(&[198, 19, g.below(2) as u8, g.below(24) as u8]);
    ip.extend(std::iter::repeat_n(1u8, opts));
    let c = csum(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&ip);
    p.extend_from_slice(l4);
    p
}

fn ipv6(g: &mut Gen, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = eth(g, 0x86dd);
    p.extend_from_slice(&[0x60, 0, 0, 0]);
    p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    p.extend_from_slice(&[proto, 64]);
    for last in [g.below(16) as u8, g.below(16) as u8] {
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 11]);
        p.push(last);
    }
    p.extend_from_slice(l4);
    p
}

fn udp(g: &mut Gen, payload: usize) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&g.pick(&PORTS).to_be_bytes());
    u.extend_from_slice(&g.pick(&PORTS).to_be_bytes());
    u.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend(g.bytes(payload));
    u
}

fn tcp(g: &mut Gen, payload: usize) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&g.pick(&PORTS).to_be_bytes());
    t.extend_from_slice(&g.pick(&PORTS).to_be_bytes());
    t.extend(g.bytes(8));
    t.extend_from_slice(&[0x50, *g.pick(&[0x02u8, 0x10, 0x12, 0x18, 0x11, 0x04])]);
    t.extend(g.bytes(6));
    t.extend(g.bytes(payload));
    t
}

fn icmp(g: &mut Gen, payload: usize) -> Vec<u8> {
    let mut i = vec![*g.pick(&[8u8, 8, 0, 3]), 0, 0, 0];
    i.extend(g.bytes(4 + payload));
    let c = csum(&i, 0);
    i[2..4].copy_from_slice(&c.to_be_bytes());
    i
}

fn payload_len(g: &mut Gen) -> usize {
    match g.below(10) {
        0..=5 => g.below(64) as usize,
        6..=8 => g.below(400) as usize,
        _ => g.below(1400) as usize,
    }
}

fn valid(g: &mut Gen) -> Vec<u8> {
    let n = payload_len(g);
    match g.below(12) {
        0..=2 => {
            let l4 = udp(g, n);
            ipv4(g, 17, &l4)
        }
        3..=4 => {
            let l4 = tcp(g, n);
            ipv4(g, 6, &l4)
        }
        5..=6 => {
            let l4 = icmp(g, n);
            ipv4(g, 1, &l4)
        }
        7 => {
            let l4 = udp(g, n);
            ipv6(g, 17, &l4)
        }
        8 => {
            let l4 = tcp(g, n);
            ipv6(g, 6, &l4)
        }
        9 => {
            let l4 = icmp(g, n);
            ipv6(g, 58, &l4)
        }
        10 => {
            // ARP request.
            let mut p = eth(g, 0x0806);
            p.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
            p.extend(g.bytes(20));
            p
        }
        _ => {
            // Local experimental EtherType with a 4-byte tag, or VLAN.
            let t = *g.pick(&[0x88b5u16, 0x8100]);
            let mut p = eth(g, t);
            p.extend(g.bytes(4));
            let l4 = udp(g, n);
            let inner = ipv4(g, 17, &l4);
            p.extend_from_slice(&inner[12..]);
            p
        }
    }
}

/// The packet list: valid frames, truncated ones, odd lengths, random
/// bytes (some posing as IPv4), short ones (< 14) and a few long ones.
fn packets(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut g = Gen(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let p = match g.below(20) {
            0..=9 => valid(&mut g),
            10..=12 => {
                let mut p = valid(&mut g);
                let cut = g.below(p.len() as u64 + 1) as usize;
                p.truncate(cut);
                p
            }
            13 => {
                let mut p = valid(&mut g);
                if p.len() & 1 == 0 {
                    p.push(g.byte());
                }
                p
            }
            14..=15 => {
                let n = g.below(300) as usize;
                g.bytes(n)
            }
            16 => {
                let n = 14 + g.below(100) as usize;
                let mut p = g.bytes(n);
                p[12] = 0x08;
                p[13] = 0;
                if let Some(b) = p.get_mut(14) {
                    *b = 0x45;
                }
                p
            }
            17 => {
                let n = g.below(14) as usize;
                g.bytes(n)
            }
            18 => {
                let n = 1200 + g.below(300) as usize;
                let l4 = udp(&mut g, n);
                ipv4(&mut g, 17, &l4)
            }
            _ => {
                if g.below(8) == 0 {
                    // Longer than the linear area / a page.
                    let n = 3500 + g.below(600) as usize;
                    let l4 = udp(&mut g, n);
                    ipv4(&mut g, 17, &l4)
                } else {
                    valid(&mut g)
                }
            }
        };
        out.push(p);
    }
    out
}

// ---------------------------------------------------------------- programs

/// One object under test: its Image, the globals it is loaded with, and
/// the map entries both sides start with.
struct Subject {
    label: String,
    image: Image,
    globals: Vec<(&'static str, Vec<u8>)>,
    entries: Vec<(&'static str, Vec<u8>, Vec<u8>)>,
    /// Maps whose values are not deterministic (compare keys only).
    keys_only: Vec<&'static str>,
}

fn corpus_image(name: &str) -> Image {
    let e = nfkit_corpus::get(name).unwrap_or_else(|| panic!("corpus program {name}"));
    Image::from_elf(e.object, e.name).unwrap_or_else(|err| panic!("{name}: {err}"))
}

fn lpm(prefix: u32, addr: [u8; 4]) -> Vec<u8> {
    let mut k = prefix.to_le_bytes().to_vec();
    k.extend_from_slice(&addr);
    k
}

fn route(action: u32, ifindex: u32) -> Vec<u8> {
    let mut v = action.to_le_bytes().to_vec();
    v.extend_from_slice(&ifindex.to_le_bytes());
    v
}

fn subjects() -> Vec<Subject> {
    let mut out = Vec::new();
    for e in nfkit_corpus::ENTRIES {
        let mut s = Subject {
            label: e.name.to_string(),
            image: corpus_image(e.name),
            globals: Vec::new(),
            entries: Vec::new(),
            keys_only: Vec::new(),
        };
        match e.name {
            "xdp_port_filter" => {
                for p in [53u16, 22, 9999] {
                    s.entries.push((
                        "blocked_ports",
                        p.to_be_bytes().to_vec(),
                        0u64.to_le_bytes().to_vec(),
                    ));
                }
            }
            "xdp_lpm_route" => {
                s.entries
                    .push(("routes", lpm(16, [198, 19, 0, 0]), route(1, 0)));
                s.entries
                    .push(("routes", lpm(24, [198, 19, 1, 0]), route(2, 7)));
                s.entries
                    .push(("routes", lpm(30, [198, 19, 1, 4]), route(0, 0)));
                s.entries
                    .push(("routes", lpm(32, [198, 19, 0, 9]), route(2, 3)));
            }
            "xdp_legacy_maps" => {
                for (proto, action) in [(0x0806u16, 1u32), (0x86dd, 3), (0x88b5, 9), (0x8100, 4)] {
                    s.entries.push((
                        "policy",
                        proto.to_le_bytes().to_vec(),
                        action.to_le_bytes().to_vec(),
                    ));
                }
            }
            "tc_sample_redirect" => {
                for (host, ifindex) in [(3u8, 5u32), (7, 1), (11, 42)] {
                    s.entries.push((
                        "redirect_to",
                        [198, 18, 0, host].to_vec(),
                        ifindex.to_le_bytes().to_vec(),
                    ));
                }
                s.globals
                    .push(("sample_every", 0u32.to_le_bytes().to_vec()));
                let mut every = Subject {
                    label: "tc_sample_redirect(sample_every=1)".into(),
                    image: corpus_image(e.name),
                    globals: vec![("sample_every", 1u32.to_le_bytes().to_vec())],
                    entries: s.entries.clone(),
                    keys_only: vec!["sampled_at"],
                };
                every.label = "tc_sample_redirect(sample_every=1)".into();
                out.push(every);
                s.label = "tc_sample_redirect(sample_every=0)".into();
            }
            _ => {}
        }
        out.push(s);
    }
    out.push(Subject {
        label: "helpers".into(),
        image: {
            let obj = compile_helpers();
            let image = Image::from_file(&obj).expect("helpers image");
            let _ = std::fs::remove_file(&obj);
            image
        },
        globals: Vec::new(),
        entries: Vec::new(),
        keys_only: Vec::new(),
    });
    out
}

/// Compiles `tests/progs/helpers.c` (helpers the corpus leaves out).
fn compile_helpers() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = dir.join("tests/progs/helpers.c");
    let out = std::env::temp_dir().join(format!("nfkit-vm-diff-{}.o", std::process::id()));
    nfkit_corpus::BpfBuild::new(&src)
        .arg("-mcpu=v3")
        .include(dir.join("../../corpus"))
        .out(out)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------- comparing

/// The engines every program runs on.
const ENGINES: [Engine; 2] = [Engine::Jit, Engine::Interp];

struct Sides {
    /// One VM per engine of [`ENGINES`], in that order.
    vms: Vec<(Engine, Vm)>,
    kernel: Loaded,
}

fn setup(s: &Subject) -> Sides {
    let mut image = s.image.clone();
    let mut specs = image.maps.clone();
    for (name, bytes) in &s.globals {
        nfkit_kernel::set_global(&image, &mut specs, name, bytes).expect("global");
    }
    image.maps = specs;
    let vms: Vec<(Engine, Vm)> = ENGINES
        .iter()
        .map(|&engine| {
            let config = VmConfig {
                ncpus: nfkit_kernel::possible_cpus().expect("cpus") as u32,
                clock: Arc::new(FixedClock::new(1_000_000_000)),
                rng: Arc::new(SeqRng::new(7)),
                ..VmConfig::kernel()
            }
            .with_engine(engine);
            let vm = Vm::new(&image, config)
                .unwrap_or_else(|e| panic!("{}: VM load ({engine}): {e}", s.label));
            (engine, vm)
        })
        .collect();
    let kernel = load_image(&image, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{}: kernel load: {e}", s.label));
    for (map, k, v) in &s.entries {
        for (_, vm) in &vms {
            vm.map(map)
                .unwrap_or_else(|| panic!("{}: VM map {map}", s.label))
                .update(k, v, 0)
                .unwrap_or_else(|e| panic!("{}: VM update {map}: {e}", s.label));
        }
        kernel
            .map(map)
            .unwrap_or_else(|| panic!("{}: kernel map {map}", s.label))
            .update(k, v, 0)
            .unwrap_or_else(|e| panic!("{}: kernel update {map}: {e}", s.label));
    }
    Sides { vms, kernel }
}

/// A map's contents, comparable: key -> value (per-CPU: the test CPU's value).
fn kernel_map(m: &KMap) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for k in m.keys() {
        let v = if m.is_percpu() {
            m.lookup_percpu(&k)
                .expect("lookup")
                .and_then(|v| v.into_iter().nth(cpu()))
        } else {
            m.lookup(&k).expect("lookup")
        };
        if let Some(v) = v {
            out.insert(k, v);
        }
    }
    out
}

fn vm_map(m: &nfkit_vm::Map) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for k in m.keys() {
        let c = if m.ncpus() > 1 { cpu() as u32 } else { 0 };
        if let Ok(Some(v)) = m.lookup_cpu(&k, c) {
            out.insert(k, v);
        }
    }
    out
}

/// Differences between the maps of the kernel and of `vm` (empty when equal).
fn map_diffs(s: &Subject, kernel: &Loaded, vm: &Vm) -> Vec<String> {
    let mut out = Vec::new();
    for spec in &s.image.maps {
        if matches!(spec.map_type, MapType::ProgArray | MapType::Ringbuf) {
            continue;
        }
        if matches!(
            spec.kind,
            MapKind::Global {
                read_only: true,
                ..
            }
        ) {
            continue;
        }
        let (Some(k), Some(v)) = (kernel.map(&spec.name), vm.map(&spec.name)) else {
            out.push(format!("map {} missing on a side", spec.name));
            continue;
        };
        let km = kernel_map(&k);
        let vmm = vm_map(v);
        if s.keys_only.contains(&spec.name.as_str()) {
            let kk: Vec<_> = km.keys().collect();
            let vk: Vec<_> = vmm.keys().collect();
            if kk != vk {
                out.push(format!(
                    "map {}: keys differ: kernel {kk:?} vm {vk:?}",
                    spec.name
                ));
            }
            if km
                .values()
                .chain(vmm.values())
                .any(|v| v.iter().all(|&b| b == 0))
            {
                out.push(format!("map {}: a zero value", spec.name));
            }
            continue;
        }
        if km != vmm {
            let mut d = Vec::new();
            for key in km.keys().chain(vmm.keys()) {
                if km.get(key) != vmm.get(key) {
                    d.push(format!(
                        "key {} kernel {:?} vm {:?}",
                        hex(key),
                        km.get(key).map(|v| hex(v)),
                        vmm.get(key).map(|v| hex(v))
                    ));
                }
                if d.len() > 3 {
                    break;
                }
            }
            out.push(format!("map {}: {}", spec.name, d.join("; ")));
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The VM's view of a test run of `pkt` (XDP: `repeat` chained runs).
struct VmOut {
    ret: Result<u64, String>,
    data: Vec<u8>,
    /// The engine that ran (the last run's).
    engine: Engine,
}

fn vm_run(vm: &Vm, entry: &str, ty: ProgType, pkt: &[u8], meta_in: &[u8], repeat: u32) -> VmOut {
    let opts = RunOptions {
        cpu: cpu() as u32,
        ..RunOptions::default()
    };
    match ty {
        ProgType::Xdp => {
            let linear = &pkt[..pkt.len().min(XDP_MAX_LINEAR)];
            let mut packet = linear.to_vec();
            let mut meta: Vec<u8> = meta_in.to_vec();
            let mut headroom = 256usize;
            let total = 4096 - 320;
            let mut ret = Err("not run".to_string());
            let mut engine = Engine::Interp;
            for _ in 0..repeat.max(1) {
                let mut x = XdpMd::new(&packet);
                x.meta = &meta;
                x.headroom = headroom;
                x.tailroom = total - headroom - packet.len();
                let r = vm.run(entry, Context::Xdp(x), &opts);
                ret = r.result.map_err(|e| e.to_string());
                engine = r.engine;
                headroom = (headroom as i64 + r.head_delta) as usize;
                packet = r.packet;
                meta = r.meta;
                if ret.is_err() {
                    break;
                }
            }
            let mut data = meta;
            data.extend_from_slice(&packet);
            VmOut { ret, data, engine }
        }
        _ => {
            let r = vm.run(entry, Context::Skb(SkBuff::new(pkt)), &opts);
            let mut data = r.packet;
            if ty == ProgType::SocketFilter {
                // The test run pushes the Ethernet header back after a
                // socket filter ran from the network header, zeroed.
                let mut full = vec![0u8; 14];
                full.extend_from_slice(data.get(14..).unwrap_or_default());
                data = full;
            }
            VmOut {
                ret: r.result.map_err(|e| e.to_string()),
                data,
                engine: r.engine,
            }
        }
    }
}

/// Does `BPF_PROG_TEST_RUN` refuse `pkt` (EINVAL) for a program of type
/// `ty`? Shorter than an Ethernet header; for skb programs also longer
/// than a page minus head- and tailroom, and IPv4 / IPv6 frames whose
/// linear data cannot hold the IP header.
fn kernel_refuses(ty: ProgType, pkt: &[u8]) -> bool {
    if pkt.len() < 14 {
        return true;
    }
    if ty == ProgType::Xdp {
        return false;
    }
    let l3 = pkt.len() - 14;
    match pkt.get(12..14) {
        _ if pkt.len() > 4096 - 66 - 320 => true,
        Some([0x08, 0x00]) => l3 < 20,
        Some([0x86, 0xdd]) => l3 < 40,
        _ => false,
    }
}

#[derive(Default)]
struct Tally {
    programs: usize,
    compared: usize,
    vm_only: usize,
    frag_unchecked: usize,
    with_meta: usize,
    /// Runs compared against the kernel, per configured engine.
    per_engine: std::collections::HashMap<Engine, usize>,
    /// Runs the JIT actually ran (of those configured for it).
    jit_ran: usize,
    /// Programs the JIT VM runs on the interpreter, with the reason.
    fallbacks: BTreeMap<String, usize>,
    /// Kernel return values seen, per program: (program, value) -> runs.
    retvals: BTreeMap<(String, u32), usize>,
    mismatches: Vec<String>,
}

/// One program of a subject, on both sides.
#[derive(Clone, Copy)]
struct Target<'a> {
    s: &'a Subject,
    sides: &'a Sides,
    entry: &'a str,
    ty: ProgType,
}

/// One packet as both sides get it.
struct Input<'a> {
    /// Its number in the run.
    i: usize,
    pkt: &'a [u8],
    /// Metadata in front of the frame (XDP only).
    meta: &'static [u8],
    /// How many chained runs (XDP only).
    repeat: u32,
}

impl<'a> Input<'a> {
    /// Packet `i` for a program of type `ty`: every 7th XDP packet runs 3
    /// times; every 11th XDP frame starts with 8 bytes of metadata, given
    /// through the context (xdp_md.data = 8) as test runs take it.
    fn new(ty: ProgType, i: usize, pkt: &'a [u8]) -> Input<'a> {
        let repeat = if ty == ProgType::Xdp && i % REPEAT_EVERY == 3 {
            3
        } else {
            1
        };
        let meta: &[u8] = if ty == ProgType::Xdp && i % 11 == 5 && (14..=1600).contains(&pkt.len())
        {
            &META_IN
        } else {
            &[]
        };
        Input {
            i,
            pkt,
            meta,
            repeat,
        }
    }

    /// The packet's first 40 bytes in hex, for messages.
    fn head(&self) -> String {
        hex(&self.pkt[..self.pkt.len().min(40)])
    }
}

/// `BPF_PROG_TEST_RUN` of `input` (metadata and frame as data, the
/// metadata's length through the context).
fn kernel_run(
    kprog: &nfkit_kernel::Prog,
    input: &Input,
) -> Result<nfkit_kernel::TestRunOut, nfkit_kernel::KernelError> {
    let meta = input.meta;
    let mut data = meta.to_vec();
    data.extend_from_slice(input.pkt);
    let ctx_in = (!meta.is_empty()).then(|| {
        let mut c = Vec::new();
        for v in [meta.len() as u32, data.len() as u32, 0, 0, 0, 0] {
            c.extend_from_slice(&v.to_le_bytes());
        }
        c
    });
    kprog.test_run(&TestRun {
        data,
        ctx_in,
        repeat: input.repeat,
        data_size_out: 8192,
        ..TestRun::default()
    })
}

/// The kernel's output packet to compare, and whether to compare it. XDP
/// beyond the linear area: the kernel puts the rest of the frame in
/// fragments, which the VM does not model: compare the linear part when
/// the program did not resize the frame.
fn kernel_data(
    ty: ProgType,
    pkt: &[u8],
    k: &nfkit_kernel::TestRunOut,
    t: &mut Tally,
) -> (Vec<u8>, bool) {
    if ty == ProgType::Xdp && pkt.len() > XDP_MAX_LINEAR {
        let tail = pkt.len() - XDP_MAX_LINEAR;
        let same_size = k.data.len() == pkt.len();
        if !same_size {
            t.frag_unchecked += 1;
        }
        (
            k.data[..k.data.len().saturating_sub(tail)].to_vec(),
            same_size,
        )
    } else {
        (k.data.clone(), true)
    }
}

/// Runs `input` in every engine's VM and compares with the kernel's run
/// `k`: return value, packet, maps; the differences (each naming its
/// engine) and the engines that differ.
fn compare(
    p: Target,
    input: &Input,
    k: &nfkit_kernel::TestRunOut,
    t: &mut Tally,
) -> (Vec<String>, Vec<Engine>) {
    t.compared += 1;
    if !input.meta.is_empty() {
        t.with_meta += 1;
    }
    *t.retvals
        .entry((p.entry.to_string(), k.retval))
        .or_default() += 1;
    let (kdata, check_data) = kernel_data(p.ty, input.pkt, k, t);
    let mut diffs = Vec::new();
    let mut bad = Vec::new();
    for (engine, vm) in &p.sides.vms {
        let v = vm_run(vm, p.entry, p.ty, input.pkt, input.meta, input.repeat);
        *t.per_engine.entry(*engine).or_default() += 1;
        if v.engine == Engine::Jit {
            t.jit_ran += 1;
        }
        let mut d = Vec::new();
        match &v.ret {
            Ok(r) if *r as u32 == k.retval => {}
            other => d.push(format!("return kernel {} vm {other:?}", k.retval)),
        }
        if check_data && kdata != v.data {
            d.push(format!(
                "packet kernel {} bytes {} vm {} bytes {}",
                kdata.len(),
                hex(&kdata[..kdata.len().min(48)]),
                v.data.len(),
                hex(&v.data[..v.data.len().min(48)])
            ));
        }
        d.extend(map_diffs(p.s, &p.sides.kernel, vm));
        if !d.is_empty() {
            bad.push(*engine);
        }
        diffs.extend(d.into_iter().map(|x| format!("[{engine}] {x}")));
    }
    (diffs, bad)
}

/// A packet the kernel refused: VM only. It must run to completion
/// without faulting (verified programs check their bounds).
fn vm_only(p: Target, input: &Input, t: &mut Tally) {
    for (engine, vm) in &p.sides.vms {
        let v = vm_run(vm, p.entry, p.ty, input.pkt, input.meta, input.repeat);
        if let Err(e) = v.ret {
            t.mismatches.push(format!(
                "{} {} pkt {} [{engine}]: VM fault on a VM-only packet: {e}",
                p.s.label, p.entry, input.i
            ));
        }
    }
    t.vm_only += 1;
    // The kernel's maps did not see this packet.
    resync(p.s, p.sides);
}

/// Runs one packet on both sides and tallies the result; `bad` counts the
/// packets that differ (the first 3 are reported in full).
fn run_packet(
    p: Target,
    kprog: &nfkit_kernel::Prog,
    input: &Input,
    t: &mut Tally,
    bad: &mut usize,
) {
    let (label, entry, i, pkt) = (&p.s.label, p.entry, input.i, input.pkt);
    let refused = kernel_refuses(p.ty, pkt);
    let k = match kernel_run(kprog, input) {
        Err(e) if refused && e.errno() == Some(libc::EINVAL) => return vm_only(p, input, t),
        Err(e) => {
            t.mismatches.push(format!(
                "{label} {entry} pkt {i} (len {}) {}: kernel: {e}",
                pkt.len(),
                input.head()
            ));
            return;
        }
        Ok(k) => k,
    };
    if refused {
        t.mismatches.push(format!(
            "{label} {entry} pkt {i}: kernel accepted a packet of {} bytes",
            pkt.len()
        ));
    }
    let (diffs, engines) = compare(p, input, &k, t);
    if !diffs.is_empty() {
        *bad += 1;
        if *bad <= 3 {
            t.mismatches.push(format!(
                "{label} {entry} pkt {i} (len {}, repeat {}, engines {engines:?}) {}: {}",
                pkt.len(),
                input.repeat,
                input.head(),
                diffs.join(" | ")
            ));
        }
        // Start the next packet from equal maps again.
        resync(p.s, p.sides);
    }
}

/// Runs every packet through every program of `s` on both sides.
fn run_subject(s: &Subject, pkts: &[Vec<u8>], t: &mut Tally) {
    let sides = setup(s);
    let entries: Vec<(String, ProgType)> = sides.vms[0].1.entries();
    for (entry, ty) in entries {
        t.programs += 1;
        for (engine, vm) in &sides.vms {
            match vm.engine(entry.as_str()) {
                Some(EngineUse::Fallback(why)) if *engine == Engine::Jit => {
                    *t.fallbacks.entry(why.clone()).or_default() += 1;
                }
                Some(u) if u.engine() == *engine => {}
                other => panic!("{}: {entry} on {engine} runs on {other:?}", s.label),
            }
        }
        let kprog = sides
            .kernel
            .prog(&entry)
            .unwrap_or_else(|| panic!("{}: kernel program {entry}", s.label));
        let p = Target {
            s,
            sides: &sides,
            entry: &entry,
            ty,
        };
        let mut bad = 0;
        for (i, pkt) in pkts.iter().enumerate() {
            run_packet(p, kprog, &Input::new(ty, i, pkt), t, &mut bad);
        }
        if bad > 3 {
            t.mismatches
                .push(format!("{} {entry}: {bad} packets differ in all", s.label));
        }
    }
}

/// Copies the kernel's map contents into the VM after a mismatch, so one
/// difference is not reported again for every later packet.
fn resync(s: &Subject, sides: &Sides) {
    for spec in &s.image.maps {
        if matches!(spec.map_type, MapType::ProgArray | MapType::Ringbuf)
            || matches!(
                spec.kind,
                MapKind::Global {
                    read_only: true,
                    ..
                }
            )
        {
            continue;
        }
        for (_, v) in &sides.vms {
            resync_map(&sides.kernel, spec, v);
        }
    }
}

/// Copies one kernel map's contents into the VM's map of the same name.
fn resync_map(kernel: &Loaded, spec: &nfkit_object::MapSpec, vm: &Vm) {
    let (Some(k), Some(v)) = (kernel.map(&spec.name), vm.map(&spec.name)) else {
        return;
    };
    for key in v.keys() {
        let _ = v.delete(&key);
    }
    if k.is_percpu() {
        // Every CPU's value, each padded to 8 bytes, as the VM takes them.
        for key in k.keys() {
            let Ok(Some(vals)) = k.lookup_percpu(&key) else {
                continue;
            };
            let mut all = Vec::new();
            for val in vals.iter().take(v.ncpus() as usize) {
                let mut val = val.clone();
                val.resize(val.len().div_ceil(8) * 8, 0);
                all.extend(val);
            }
            let _ = v.update(&key, &all, 0);
        }
        return;
    }
    for (key, val) in kernel_map(&k) {
        let _ = v.update(&key, &val, 0);
    }
}

#[test]
fn vm_and_kernel_agree() {
    // CPU 1 when there is one: per-CPU slots other than 0 and programs on
    // a CPU other than 0 are where CPU handling goes wrong.
    let cpu = if nfkit_kernel::pin_thread_to_cpu(1).is_ok() {
        1
    } else {
        0
    };
    nfkit_kernel::pin_thread_to_cpu(cpu).expect("pin the test thread");
    CPU.set(cpu).expect("set once");
    let pkts = packets(SEED, PACKETS);
    let mut t = Tally::default();
    let subjects = subjects();
    for s in &subjects {
        run_subject(s, &pkts, &mut t);
    }
    assert_eq!(nfkit_kernel::current_cpu(), Some(cpu), "still on CPU {cpu}");
    let per = |e: Engine| t.per_engine.get(&e).copied().unwrap_or(0);
    let summary = format!(
        "kernel-diff: {} programs x {} packets: {} runs compared (VM vs BPF_PROG_TEST_RUN; {} with input metadata), each on both engines: jit {} (JIT-compiled {}, programs on the interpreter fallback {}), interp {}; {} VM-only (refused by the kernel), {} beyond the linear area with a resized frame (bytes not compared), {} mismatches",
        t.programs,
        pkts.len(),
        t.compared,
        t.with_meta,
        per(Engine::Jit),
        t.jit_ran,
        t.fallbacks.values().sum::<usize>(),
        per(Engine::Interp),
        t.vm_only,
        t.frag_unchecked,
        t.mismatches.len()
    );
    println!("{summary}");
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/nfkit-test-summary"
    ));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("kernel-diff.txt"), format!("{summary}\n"));
    for m in &t.mismatches {
        eprintln!("MISMATCH {m}");
    }
    assert!(t.compared >= 1000 * t.programs / 2, "too few runs compared");
    assert_eq!(
        per(Engine::Jit),
        t.compared,
        "every run compared on the JIT VM"
    );
    assert_eq!(
        per(Engine::Interp),
        t.compared,
        "every run compared on the interpreter VM"
    );
    if !t.fallbacks.is_empty() {
        eprintln!("JIT fallbacks: {:?}", t.fallbacks);
    }
    if Engine::best() == Engine::Jit {
        assert_eq!(
            t.jit_ran,
            per(Engine::Jit),
            "every run of the JIT VM is JIT-compiled (fallbacks {:?})",
            t.fallbacks
        );
    }
    assert!(t.vm_only > 0, "no packet the kernel refuses");
    assert!(t.with_meta > 1000, "too few frames with input metadata");
    // The paths the rules above are about were taken: redirects (to
    // interfaces that do not exist), transmits, resizing, drops.
    for (prog, code) in [
        ("xdp_lpm_route", 4),
        ("tc_sample_redirect", 7),
        ("xdp_icmp_echo", 3),
        ("xdp_adjust", 3),
        ("xdp_meta", 3),
        ("xdp_meta", 2),
        ("xdp_port_filter", 1),
        ("xdp_dispatch", 1),
        ("tc_rewrite", 3),
        ("socket_len", 0),
    ] {
        let n = t
            .retvals
            .get(&(prog.to_string(), code))
            .copied()
            .unwrap_or(0);
        assert!(n > 0, "{prog} never returned {code}");
    }
    assert!(
        t.mismatches.is_empty(),
        "{} mismatches (see above)",
        t.mismatches.len()
    );
}

#[test]
fn generated_packets_cover_the_cases() {
    let pkts = packets(SEED, PACKETS);
    assert_eq!(pkts, packets(SEED, PACKETS), "deterministic");
    let count = |f: &dyn Fn(&Vec<u8>) -> bool| pkts.iter().filter(|p| f(p)).count();
    assert!(count(&|p| p.len() < 14) > 10, "short");
    assert!(
        count(&|p| p.len() > XDP_MAX_LINEAR) > 2,
        "beyond the linear area"
    );
    assert!(count(&|p| p.len() % 2 == 1) > 100, "odd lengths");
    assert!(
        count(&|p| p.get(12..14) == Some(&[0x08, 0][..]) && p.len() >= 34) > 300,
        "IPv4"
    );
    assert!(
        count(&|p| p.get(12..14) == Some(&[0x86, 0xdd][..])) > 50,
        "IPv6"
    );
    assert!(
        count(&|p| p.get(12..14) == Some(&[0x88, 0xb5][..])) > 10,
        "tagged"
    );
}
