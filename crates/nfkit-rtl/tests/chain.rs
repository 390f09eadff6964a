//! The DDoS chain (`examples/ddos.py`, compiled for XDP: a static build,
//! one function) and every catalogue NF in a one-NF static chain, on the
//! core against the VM: r0, packet bytes, instruction count and redirect
//! of every packet, and every map used afterwards, on each example
//! capture and on 10,000 generated frames.

#[path = "common/catalogue.rs"]
mod catalogue;
mod common;

use catalogue::{nf_script, NFS};
use common::Rng;
use nfkit_object::Image;
use nfkit_rtl::{Core, Ctx, MapKind, Program, Redirect, RunInput};
use nfkit_vm::{Context, FixedClock, RunOptions, SeqRng, Vm, VmConfig, XdpMd};
use std::sync::Arc;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
/// Lines a map declaring more gets (the chain's tables declare 65536).
const CAP: u32 = 128;

fn ddos() -> (Image, usize) {
    let path = format!("{EXAMPLES}/ddos.py");
    let src = std::fs::read_to_string(&path).expect("examples/ddos.py");
    compile("examples/ddos.py", &src)
}

/// A chain script's image and entry (a static XDP build).
fn compile(name: &str, src: &str) -> (Image, usize) {
    let c = nfkit_lang::compile(name, src, &nfkit_lang::Options::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let name = c.entry().expect("the script runs a chain").to_string();
    let entry = c
        .image
        .entries
        .iter()
        .position(|e| e.name == name)
        .expect("entry in the image");
    (c.image, entry)
}

struct Pair {
    vm: Vm,
    clock: Arc<FixedClock>,
    core: Core,
    entry: usize,
    verdicts: [u64; 5],
}

impl Pair {
    fn new(image: &Image, entry: usize) -> Pair {
        let clock = Arc::new(FixedClock::new(0));
        let config = VmConfig {
            ncpus: 1,
            clock: clock.clone(),
            rng: Arc::new(SeqRng::new(1)),
            ..VmConfig::kernel()
        };
        let vm = Vm::new(image, config).expect("the VM loads the chain");
        let prog = Program::from_image_sized(image, entry, Some(CAP))
            .unwrap_or_else(|e| panic!("the core loads the chain: {e}"));
        Pair {
            vm,
            clock,
            core: Core::new(prog).expect("RTL model built"),
            entry,
            verdicts: [0; 5],
        }
    }

    /// One packet on both; `Err` says how they differ.
    fn run(&mut self, frame: &[u8], ts: u64) -> Result<(), String> {
        self.clock.set(ts);
        let want = self.vm.run(
            self.entry,
            Context::Xdp(XdpMd::new(frame)),
            &RunOptions::default(),
        );
        let mut input = RunInput::new(frame);
        input.ctx = Ctx::Xdp {
            ingress_ifindex: 1,
            rx_queue_index: 0,
        };
        input.timestamp = ts;
        let got = self.core.run(&input).map_err(|e| e.to_string())?;
        common::compare_xdp(&want, &got)?;
        let vm_redirect = want.redirect.map(|r| match r {
            nfkit_vm::Redirect::Ifindex { ifindex, .. } => Redirect::Port(ifindex),
            nfkit_vm::Redirect::Map { map, key, .. } => Redirect::Map { map, key },
            nfkit_vm::Redirect::Broadcast {
                map,
                exclude_ingress,
            } => Redirect::Broadcast {
                map,
                exclude_ingress,
            },
            other => panic!("the chain redirects to {other:?}"),
        });
        if vm_redirect != got.redirect {
            return Err(format!(
                "redirect: VM {vm_redirect:?}, RTL {:?}",
                got.redirect
            ));
        }
        // XDP code in the low 32 bits (the chain's r0 carries more above).
        let r0 = got.result.unwrap_or_default();
        self.verdicts[(r0 as u32 as usize).min(4)] += 1;
        Ok(())
    }

    /// Every map the chain uses holds the same entries in both.
    fn same_maps(&mut self) {
        let defs = self.core.program().maps.maps.clone();
        for (i, d) in defs.iter().enumerate() {
            if d.kind == MapKind::Unused {
                continue;
            }
            let m = self.vm.map(&d.name).expect("the VM has the map");
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = m
                .entries()
                .into_iter()
                .map(|(k, mut v)| {
                    v.truncate(d.value_size as usize);
                    (k, v)
                })
                .collect();
            if d.kind == MapKind::Array {
                // Sized down: the indices past the lines stayed zero.
                let (kept, past): (Vec<_>, Vec<_>) = want.into_iter().partition(|(k, _)| {
                    u32::from_le_bytes(k[..4].try_into().expect("4-byte index")) < d.max_entries
                });
                assert!(
                    past.iter().all(|(_, v)| v.iter().all(|&b| b == 0)),
                    "{}: entries past the lines",
                    d.name
                );
                want = kept;
            }
            want.sort();
            let got = self.core.map_entries(i).expect("entries");
            assert_eq!(got, want, "map {}", d.name);
        }
    }
}

#[test]
fn ddos_chain_loads_on_the_core() {
    let (image, entry) = ddos();
    assert!(
        image.maps.len() > 8,
        "the chain declares {}",
        image.maps.len()
    );
    let prog = Program::from_image_sized(&image, entry, Some(CAP)).expect("loads");
    let used: Vec<&str> = prog
        .maps
        .maps
        .iter()
        .filter(|m| m.kind != MapKind::Unused)
        .map(|m| m.name.as_str())
        .collect();
    // 48-byte keys (sampling), LRU sets, the flood devmap.
    for name in ["nf_sample_flows", "nf_sets_src", "nfkit_flood"] {
        assert!(used.contains(&name), "{name} placed: {used:?}");
    }
    assert!(used.len() > 8, "{used:?}");
    let lru = prog
        .maps
        .maps
        .iter()
        .find(|m| m.name == "nf_sets_src")
        .expect("sets");
    assert!(lru.lru && lru.max_entries == CAP);
    // Without the cap, the tables do not fit the lines, by name.
    let e = Program::from_image(&image, entry)
        .expect_err("the declared entries exceed the lines")
        .to_string();
    assert!(e.starts_with("map `") && e.contains(" entries "), "{e}");
}

#[test]
fn ddos_chain_matches_the_vm_on_the_example_captures() {
    let (image, entry) = ddos();
    let mut total = 0;
    for ent in std::fs::read_dir(EXAMPLES).expect("examples/") {
        let path = ent.expect("entry").path();
        let name = path.to_string_lossy().into_owned();
        if !name.ends_with(".pcap") || name.ends_with(".out.pcap") {
            continue;
        }
        let mut pair = Pair::new(&image, entry);
        for (i, p) in nfkit_pcap::read_file(&path)
            .expect("pcap")
            .iter()
            .enumerate()
        {
            pair.run(&p.data, p.ts_ns)
                .unwrap_or_else(|e| panic!("{name} packet {}: {e}", i + 1));
            total += 1;
        }
        pair.same_maps();
        if name.ends_with("/ddos.pcap") {
            // examples/ddos.expected: passed, dropped and sampled.
            let v = pair.verdicts;
            assert_eq!((v[1], v[2], v[4]), (248, 54, 28), "{v:?}");
        }
    }
    assert!(total > 300, "{total} packets");
}

/// The Internet checksum of `b`.
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet frame: IPv4 (TCP, UDP or ICMP) or IPv6 (UDP) of one of 48
/// flows between 12 sources and 4 destinations, or (one in 10) random
/// bytes, some truncated.
fn frame(rng: &mut Rng) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    if rng.next().is_multiple_of(10) {
        let len = (rng.next() % 80) as usize;
        let mut g: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if len > 14 && rng.next().is_multiple_of(2) {
            g[12] = 0x08;
            g[13] = 0;
        }
        return g;
    }
    let flow = rng.next() % 48;
    let (src, dst) = ((flow % 12) as u8, (flow / 12) as u8);
    let proto = [6u8, 17, 17, 1][(flow % 4) as usize];
    let sport = 1000 + (flow % 3) as u16;
    let dport = [80u16, 53, 443][(flow % 3) as usize];
    let l4: Vec<u8> = match proto {
        6 => {
            let mut t = vec![0u8; 20];
            t[..2].copy_from_slice(&sport.to_be_bytes());
            t[2..4].copy_from_slice(&dport.to_be_bytes());
            t[12] = 0x50;
            t[13] = 0x02;
            t
        }
        17 => {
            let mut u = vec![0u8; 8 + (rng.next() % 16) as usize];
            u[..2].copy_from_slice(&sport.to_be_bytes());
            u[2..4].copy_from_slice(&dport.to_be_bytes());
            let n = u.len() as u16;
            u[4..6].copy_from_slice(&n.to_be_bytes());
            u
        }
        _ => vec![8, 0, 0, 0, 0, 1, 0, 1],
    };
    if flow % 8 == 7 {
        // IPv6, UDP.
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        h[6] = 17;
        h[7] = 64;
        h[8] = 0x20;
        h[9] = 0x01;
        h[23] = src;
        h[24] = 0x20;
        h[25] = 0x01;
        h[38] = 1;
        h[39] = dst;
        f.extend_from_slice(&h);
    } else {
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut h = vec![0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&[198, 18, 0, src]);
        h[16..20].copy_from_slice(&[198, 18, 1, dst]);
        let sum = checksum(&h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(&l4);
    if rng.next().is_multiple_of(20) {
        let cut = (rng.next() as usize) % f.len();
        f.truncate(cut.max(1));
    }
    f
}

#[test]
fn ddos_chain_matches_the_vm_on_random_frames() {
    let (image, entry) = ddos();
    let mut pair = Pair::new(&image, entry);
    let mut rng = Rng(0x00dd_0522);
    let mut ts: u64 = 1_000_000_000;
    for i in 0..10_000 {
        // Bursts (tens of microseconds apart), short pauses (up to 0.4
        // s) and, halfway, one longer than the blacklist's 10 s:
        // destinations go out of profile and back, pairs run dry, sources
        // are blacklisted and expire.
        ts += if i == 5000 {
            11_000_000_000
        } else if rng.next().is_multiple_of(512) {
            rng.next() % 400_000_000
        } else {
            rng.next() % 50_000
        };
        let f = frame(&mut rng);
        pair.run(&f, ts)
            .unwrap_or_else(|e| panic!("frame {i} ({} bytes): {e}", f.len()));
    }
    pair.same_maps();
    let v = pair.verdicts;
    assert!(
        v[1] > 0 && v[2] > 0 && v[4] > 0,
        "dropped, passed and redirected all seen: {v:?}"
    );
}

/// Generated frames per NF (`NFKIT_RTL_NF_FRAMES`, default 2,000: 56,000
/// over the catalogue; 10,000 each takes about 9 minutes).
fn nf_frames() -> usize {
    std::env::var("NFKIT_RTL_NF_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// The catalogue in two halves (even and odd entries of `NFS`), so that
/// the test harness runs them side by side.
#[test]
fn catalogue_nfs_match_the_vm_even() {
    catalogue_nfs_match_the_vm(0);
}

#[test]
fn catalogue_nfs_match_the_vm_odd() {
    catalogue_nfs_match_the_vm(1);
}

fn catalogue_nfs_match_the_vm(half: usize) {
    let captures: Vec<Vec<nfkit_pcap::Packet>> = {
        let mut paths: Vec<_> = std::fs::read_dir(EXAMPLES)
            .expect("examples/")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                let s = p.to_string_lossy();
                s.ends_with(".pcap") && !s.ends_with(".out.pcap")
            })
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| nfkit_pcap::read_file(p).expect("pcap"))
            .collect()
    };
    for &(module, func, args, verdict) in NFS.iter().skip(half).step_by(2) {
        let name = format!("{module}.{func}");
        let (image, entry) = compile(
            &format!("{func}.py"),
            &nf_script(module, func, args, verdict),
        );
        for packets in &captures {
            let mut pair = Pair::new(&image, entry);
            for (i, p) in packets.iter().enumerate() {
                pair.run(&p.data, p.ts_ns)
                    .unwrap_or_else(|e| panic!("{name} packet {}: {e}", i + 1));
            }
            pair.same_maps();
        }
        let mut pair = Pair::new(&image, entry);
        let mut rng = Rng(0x22_0000 + func.len() as u64);
        let mut ts: u64 = 1_000_000_000;
        for i in 0..nf_frames() {
            ts += if rng.next().is_multiple_of(512) {
                rng.next() % 400_000_000
            } else {
                rng.next() % 50_000
            };
            let f = frame(&mut rng);
            pair.run(&f, ts)
                .unwrap_or_else(|e| panic!("{name} frame {i} ({} bytes): {e}", f.len()));
        }
        pair.same_maps();
    }
}

#[test]
fn the_dpi_nf_is_refused_by_name() {
    let (image, entry) = compile("match.py", &nf_script("dpi", "match", "0, 0", false));
    let e = Program::from_image_sized(&image, entry, Some(CAP))
        .expect_err("the DPI NF needs helpers the core lacks")
        .to_string();
    for lack in [
        "bpf_xdp_load_bytes",
        "bpf_xdp_get_buff_len",
        "bpf_loop",
        "a function address",
    ] {
        assert!(e.contains(lack), "{e}");
    }
}

#[test]
fn the_other_example_chains_match_the_vm_or_are_refused_by_name() {
    for name in ["dscp_dispatch", "flow_limiter", "port_stats", "tcp_options"] {
        let src = std::fs::read_to_string(format!("{EXAMPLES}/{name}.py")).expect("script");
        let (image, entry) = compile(&format!("examples/{name}.py"), &src);
        let mut pair = Pair::new(&image, entry);
        let packets = nfkit_pcap::read_file(format!("{EXAMPLES}/{name}.pcap")).expect("pcap");
        assert!(!packets.is_empty());
        for (i, p) in packets.iter().enumerate() {
            pair.run(&p.data, p.ts_ns)
                .unwrap_or_else(|e| panic!("{name} packet {}: {e}", i + 1));
        }
        pair.same_maps();
    }
    // The router's bpf_loop callback needs bpf-to-bpf calls.
    let src = std::fs::read_to_string(format!("{EXAMPLES}/router.py")).expect("router.py");
    let (image, entry) = compile("examples/router.py", &src);
    let e = Program::from_image_sized(&image, entry, Some(CAP))
        .expect_err("bpf_loop")
        .to_string();
    assert!(
        e.contains("a function address") && e.contains("bpf_loop"),
        "{e}"
    );
}

/// The chain on the switch top, its maps shared by the engines: with one
/// engine every packet equals the VM's run and so do the maps; with all
/// 16 engines at once (the capture dealt over the 4 ports) the outcome is
/// the kernel's: the same sources blacklisted, the same verdict totals.
#[test]
fn ddos_chain_in_the_switch_top() {
    use nfkit_rtl::switch::{ENGINES, PORTS};
    use nfkit_rtl::Switch;
    let (image, entry) = ddos();
    let packets = nfkit_pcap::read_file(format!("{EXAMPLES}/ddos.pcap")).expect("capture");
    let prog = Program::from_image_sized(&image, entry, Some(CAP)).expect("loads");
    let defs = prog.maps.maps.clone();
    let counters = defs
        .iter()
        .position(|d| d.name == "counters")
        .expect("counters");
    let blacklist = defs
        .iter()
        .position(|d| d.name == "nf_sets_src")
        .expect("sets");
    let mut pair = Pair::new(&image, entry);
    for p in &packets {
        pair.run(&p.data, p.ts_ns).expect("the core equals the VM");
    }
    let vm_black: Vec<Vec<u8>> = pair
        .core
        .map_entries(blacklist)
        .expect("entries")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(vm_black.len(), 1, "{vm_black:?}");
    let totals = |sw: &mut Switch| {
        let mut t = [0u64; 3];
        for e in 0..PORTS * ENGINES {
            for (k, v) in sw.map_entries_of(counters, e).expect("entries") {
                let i = u32::from_le_bytes(k[..4].try_into().expect("index")) as usize;
                t[i] += u64::from_le_bytes(v[..8].try_into().expect("u64"));
            }
        }
        t
    };
    let mut seq_by_src = std::collections::BTreeMap::new();
    for spread in [false, true] {
        let mut sw = Switch::new(prog.clone()).expect("switch model built");
        if !spread {
            sw.set_engines_per_port(1).expect("one engine");
        }
        for (i, p) in packets.iter().enumerate() {
            let port = if spread { i % PORTS } else { 0 };
            sw.offer(port, &p.data, p.ts_ns, 0).expect("taken");
        }
        let run = sw.run(50_000_000).expect("every packet leaves");
        assert_eq!(run.packets.len(), packets.len());
        let mut verdicts = [0u64; 5];
        for pkt in &run.packets {
            let r0 = *pkt.result.as_ref().expect("no fault");
            verdicts[(r0 as u32 as usize).min(4)] += 1;
        }
        let black: Vec<Vec<u8>> = sw
            .map_entries(blacklist)
            .expect("entries")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(black, vm_black, "spread {spread}");
        // The per-CPU counters, summed over the engines, count every verdict.
        assert_eq!(
            totals(&mut sw),
            [verdicts[2], verdicts[1], verdicts[4]],
            "spread {spread}"
        );
        let mut by_src: std::collections::BTreeMap<[u8; 4], [u64; 5]> = Default::default();
        for (pkt, p) in run.packets.iter().zip(&packets) {
            let src: [u8; 4] = p.data[26..30].try_into().expect("ipv4");
            let r0 = *pkt.result.as_ref().expect("no fault");
            by_src.entry(src).or_default()[(r0 as u32 as usize).min(4)] += 1;
        }
        if !spread {
            seq_by_src = by_src;
        } else {
            // Every source but the blacklisted one gets what it got one
            // packet at a time (all its packets pass); the flooder's meters
            // race between engines (a plain read-modify-write, as on a
            // multi-core host whose dispatch is not flow-affine), so how
            // many of its packets pass before the blacklist differs.
            assert_eq!(by_src.len(), seq_by_src.len());
            for (src, v) in &by_src {
                // (The set keys addresses as IPv4-mapped IPv6.)
                if vm_black.iter().any(|k| k[12..16] == src[..]) {
                    assert!(v[1] + v[4] > v[2], "{src:?}: {v:?}");
                } else {
                    assert_eq!(Some(v), seq_by_src.get(src), "{src:?}");
                }
            }
        }
        if !spread {
            assert_eq!((verdicts[1], verdicts[2], verdicts[4]), (248, 54, 28));
            // One engine: the VM's run exactly, maps included.
            for (i, d) in defs.iter().enumerate() {
                if d.kind == MapKind::Unused {
                    continue;
                }
                let want = pair.core.map_entries(i).expect("entries");
                assert_eq!(sw.map_entries(i).expect("entries"), want, "map {}", d.name);
            }
        }
    }
}
