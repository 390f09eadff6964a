//! The coprocessor's maps against the VM's: a program driven by random
//! packets looks up (and counts through the returned pointer), updates
//! (every flag, valid or not) and deletes in an exact-match map with
//! 16-byte keys, an LPM map with 16-byte data, an array and an IPv4 LPM
//! map; r0, the packet, the instruction count and every map's contents
//! match the VM's over 3,000 packets, maps filling up included. The host
//! side reads and writes the same contents the programs see, and each
//! operation's cycles are counted.

mod common;

use common::{compare, VmRun};
use nfkit_corpus::Xorshift as Rng;
use nfkit_object::{Image, MapType};
use nfkit_rtl::maps::lpm_masked;
use nfkit_rtl::{Core, Ctx, Program, RunInput, RunResult};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};

const PROG: &str = include_str!("progs/maps.s");

/// (name, type, key size, value size, entries) of the program's maps.
const MAPS: &[(&str, MapType, u32, u32, u32)] = &[
    ("flows", MapType::Hash, 16, 24, 48),
    ("routes", MapType::LpmTrie, 20, 8, 48),
    ("counters", MapType::Array, 4, 16, 32),
    ("v4", MapType::LpmTrie, 8, 8, 16),
];

fn image() -> Image {
    common::image_with_maps(PROG, MAPS)
}

fn load() -> (Vm, Core) {
    let image = image();
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let prog = Program::from_image(&image, 0).expect("within the subset");
    (vm, Core::new(prog).expect("RTL model built"))
}

fn vm_run(vm: &Vm, frame: &[u8]) -> VmRun {
    let res = vm.run(0, Context::Xdp(XdpMd::new(frame)), &RunOptions::default());
    VmRun {
        r0: res.result.ok(),
        packet: res.packet.clone(),
        insns: res.insns,
        trace: Vec::new(),
    }
}

fn rtl_run(core: &mut Core, frame: &[u8]) -> RunResult {
    let mut input = RunInput::new(frame);
    input.ctx = Ctx::Xdp {
        ingress_ifindex: 1,
        rx_queue_index: 0,
    };
    input.max_cycles = 100_000;
    core.run(&input).expect("the RTL model runs")
}

/// A packet asking for one random operation on keys from small pools (so
/// lookups hit, updates collide and maps fill up).
fn packet(rng: &mut Rng, pools: &[Vec<[u8; 16]>; 4]) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[0] = rng.below(3) as u8;
    let map = rng.below(4) as usize;
    p[1] = map as u8;
    // Mostly BPF_ANY; NOEXIST, EXIST and an invalid flag too.
    p[2] = [0, 0, 0, 1, 2, 3][rng.below(6) as usize];
    let data = pools[map][rng.below(pools[map].len() as u64) as usize];
    match map {
        0 => p[8..24].copy_from_slice(&data),
        1 | 3 => {
            let bits = if map == 1 { 128 } else { 32 };
            // Prefix lengths up to the data's, a few beyond it.
            let plen = rng.below(bits + 4) as u32;
            p[8..12].copy_from_slice(&plen.to_le_bytes());
            p[12..28].copy_from_slice(&data);
        }
        _ => {
            let idx = rng.below(36) as u32;
            p[8..12].copy_from_slice(&idx.to_le_bytes());
        }
    }
    for b in &mut p[32..56] {
        *b = rng.next() as u8;
    }
    p
}

/// The VM's entries in the core's form (LPM data masked to the prefix),
/// sorted.
fn vm_entries(vm: &Vm, name: &str, lpm: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let map = vm.map(name).expect("the VM has the map");
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = map
        .entries()
        .into_iter()
        .map(|(k, v)| {
            if lpm {
                let plen = u32::from_le_bytes([k[0], k[1], k[2], k[3]]);
                let mut m = k[..4].to_vec();
                m.extend(lpm_masked(&k[4..], plen));
                (m, v)
            } else {
                (k, v)
            }
        })
        .collect();
    out.sort();
    out
}

fn same_maps(vm: &Vm, core: &mut Core) -> Result<(), String> {
    for (i, &(name, t, ..)) in MAPS.iter().enumerate() {
        let want = vm_entries(vm, name, t == MapType::LpmTrie);
        let got = core.map_entries(i).map_err(|e| e.to_string())?;
        if want != got {
            return Err(format!(
                "map {name}: VM {} entries, RTL {}; first difference {:?}",
                want.len(),
                got.len(),
                want.iter().zip(&got).find(|(a, b)| a != b)
            ));
        }
    }
    Ok(())
}

#[test]
fn map_calls_match_the_vm_on_random_packets() {
    let (vm, mut core) = load();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pools: [Vec<[u8; 16]>; 4] = std::array::from_fn(|m| {
        (0..[64, 24, 1, 12][m])
            .map(|_| std::array::from_fn(|_| rng.next() as u8))
            .collect()
    });
    let (mut hits, mut oks, mut errs) = (0, 0, 0);
    for i in 0..3000 {
        let p = packet(&mut rng, &pools);
        let want = vm_run(&vm, &p);
        let got = rtl_run(&mut core, &p);
        if let Err(e) = compare(&want, &got) {
            panic!("packet {i} ({:?}): {e}", &p[..3]);
        }
        match (p[0], got.result) {
            (0, Ok(n)) if n != 0 => hits += 1,
            (1 | 2, Ok(0)) => oks += 1,
            (1 | 2, Ok(_)) => errs += 1,
            _ => {}
        }
        if i % 250 == 249 {
            if let Err(e) = same_maps(&vm, &mut core) {
                panic!("after packet {i}: {e}");
            }
        }
    }
    // The stream exercised hits, successful and refused updates/deletes.
    assert!(hits > 100 && oks > 300 && errs > 300, "{hits} {oks} {errs}");
    same_maps(&vm, &mut core).expect("maps equal at the end");
}

#[test]
fn host_side_contents_are_what_programs_see() {
    let (_vm, mut core) = load();
    let key = [7u8; 16];
    let value: Vec<u8> = (0..24).collect();
    core.map_update(0, &key, &value, 0).expect("insert");
    assert_eq!(
        core.map_lookup(0, &key).expect("lookup"),
        Some(value.clone())
    );
    // The program's lookup counts through the pointer: 0x0706..00 + 1.
    let mut p = vec![0u8; 64];
    p[8..24].copy_from_slice(&key);
    let r = rtl_run(&mut core, &p);
    let first = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
    assert_eq!(r.result, Ok(first + 1));
    let now = core.map_lookup(0, &key).expect("lookup").expect("present");
    assert_eq!(now[..8], (first + 1).to_le_bytes());
    assert_eq!(r.map_ops, [1, 0, 0]);
    // An LPM route set by the host answers the program's longer prefix.
    let mut rk = vec![0u8; 20];
    rk[..4].copy_from_slice(&8u32.to_le_bytes());
    rk[4] = 10;
    core.map_update(1, &rk, &[5, 0, 0, 0, 0, 0, 0, 0], 0)
        .expect("route");
    let mut p = vec![0u8; 64];
    p[1] = 1;
    p[8..12].copy_from_slice(&32u32.to_le_bytes());
    p[12..16].copy_from_slice(&[10, 1, 2, 3]);
    let r = rtl_run(&mut core, &p);
    assert_eq!(r.result, Ok(6));
    // The program deletes it; the host sees it gone.
    p[0] = 2;
    p[8..12].copy_from_slice(&8u32.to_le_bytes());
    p[12..16].copy_from_slice(&[10, 9, 9, 9]);
    let r = rtl_run(&mut core, &p);
    assert_eq!(r.result, Ok(0));
    assert_eq!(core.map_entries(1).expect("entries"), vec![]);
    assert!(core.map_delete(1, &rk).is_err());
}

#[test]
fn map_operations_take_a_handful_of_cycles() {
    let (_vm, mut core) = load();
    let mut p = vec![0u8; 64];
    p[0] = 1; // update, 16-byte key, 24-byte value
    let up = rtl_run(&mut core, &p);
    p[0] = 0;
    let look = rtl_run(&mut core, &p);
    p[0] = 2;
    let del = rtl_run(&mut core, &p);
    let (u, l, d) = (up.map_cycles[1], look.map_cycles[0], del.map_cycles[2]);
    println!("cycles: lookup {l}, update {u}, delete {d} (eBPFlow: lookup 13, update 19-33)");
    assert_eq!((up.map_ops[1], look.map_ops[0], del.map_ops[2]), (1, 1, 1));
    // Key (2 reads, the search with the second) + pick; an update copies
    // 3 rows more, answering with the last.
    assert_eq!(l, 3, "lookup");
    assert_eq!(u, l + 4, "update");
    assert_eq!(d, 3, "delete");
}
