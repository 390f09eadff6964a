//! Maps in the switch top: one shared coprocessor and value memory for all
//! 16 engines. Packets run at once on many engines, and still:
//! counters and per-source hash entries end equal to the VM's sequential
//! run (atomics are indivisible on the one copy), a per-CPU array is each
//! engine's own, a spin lock really excludes the other engines (without it
//! the same program loses updates), the host reads and writes the maps
//! between runs, and a staged version must keep the maps' layout.

mod common;

use common::image_with_maps;
use nfkit_object::{Image, MapType};
use nfkit_rtl::switch::{ENGINES, PORTS};
use nfkit_rtl::{Program, Switch, SwitchRun};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};

const MAX_CYCLES: u64 = 4_000_000;

/// Per packet (at least 34 bytes, else DROP): `totals[0]` += (1, length)
/// atomically; `by_src[source address]` += 1 atomically, inserted with
/// BPF_NOEXIST when missing; the source address written to the per-CPU
/// `scratch[0]`, some work, and read back: TX when it is still the
/// packet's own, ABORTED when another engine's packet overwrote it.
const COUNT: &str = "
    r6 = *(u32 *)(r1 + 0)
    r7 = *(u32 *)(r1 + 4)
    r2 = r6
    r2 += 34
    if r2 > r7 goto short
    r8 = *(u32 *)(r6 + 26)
    *(u32 *)(r10 - 4) = r8
    r1 = 0
    *(u32 *)(r10 - 8) = r1
    r1 = map_idx(0) ll
    r2 = r10
    r2 += -8
    call 1
    if r0 == 0 goto short
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1
    r1 = r7
    r1 -= r6
    lock *(u64 *)(r0 + 8) += r1
    r1 = map_idx(1) ll
    r2 = r10
    r2 += -4
    call 1
    if r0 != 0 goto have
    r1 = 0
    *(u64 *)(r10 - 16) = r1
    r1 = map_idx(1) ll
    r2 = r10
    r2 += -4
    r3 = r10
    r3 += -16
    r4 = 1
    call 2
    r1 = map_idx(1) ll
    r2 = r10
    r2 += -4
    call 1
    if r0 == 0 goto short
have:
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1
    r1 = map_idx(2) ll
    r2 = r10
    r2 += -8
    call 1
    if r0 == 0 goto short
    *(u64 *)(r0 + 0) = r8
    r9 = r8
    r9 *= 7
    r9 += 3
    r9 ^= r8
    r9 *= 5
    r9 += 11
    r9 ^= r8
    r9 *= 3
    r1 = *(u64 *)(r0 + 0)
    if r1 != r8 goto clobbered
    r0 = 3
    exit
clobbered:
    r0 = 0
    exit
short:
    r0 = 1
    exit
";

const COUNT_MAPS: [(&str, MapType, u32, u32, u32); 3] = [
    ("totals", MapType::Array, 4, 16, 1),
    ("by_src", MapType::Hash, 4, 8, 64),
    ("scratch", MapType::PercpuArray, 4, 8, 1),
];

/// `locked[0]`: a spin lock, then a count incremented by a plain load,
/// some work and a store while the lock is held.
const LOCKED: &str = "
    r1 = 0
    *(u32 *)(r10 - 4) = r1
    r1 = map_idx(0) ll
    r2 = r10
    r2 += -4
    call 1
    if r0 == 0 goto out
    r6 = r0
    r1 = r0
    call 93
    r7 = *(u64 *)(r6 + 8)
    r8 = r7
    r8 *= 3
    r8 ^= r7
    r8 += 9
    r8 *= 5
    r8 ^= r7
    r7 += 1
    *(u64 *)(r6 + 8) = r7
    r1 = r6
    call 94
    r0 = 3
    exit
out:
    r0 = 1
    exit
";

/// An IPv4/UDP frame from source 198.18.0.`src`, `len` bytes.
fn frame(src: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, src]);
    f[30..34].copy_from_slice(&[198, 19, 0, 1]);
    f.truncate(len);
    f
}

/// 320 frames from 24 sources (a few too short), spread over the ports
/// in order, all offered at cycle 0.
fn traffic() -> Vec<(usize, Vec<u8>)> {
    (0..320usize)
        .map(|i| {
            let len = if i % 37 == 5 { 20 } else { 60 + (i * 13) % 80 };
            (i % PORTS, frame((i * 7 % 24) as u8, len))
        })
        .collect()
}

fn load(image: &Image) -> (Vm, Switch) {
    let vm = Vm::new(image, VmConfig::kernel()).expect("the VM loads it");
    let prog = Program::from_image(image, 0).expect("within the subset");
    (vm, Switch::new(prog).expect("switch model built"))
}

fn offer_all(sw: &mut Switch, traffic: &[(usize, Vec<u8>)]) -> SwitchRun {
    for (port, f) in traffic {
        sw.offer(*port, f, 0, 0).expect("the switch takes it");
    }
    sw.run(MAX_CYCLES).expect("every packet leaves")
}

/// The most engines that were inside a run at one time.
fn max_concurrent(run: &SwitchRun) -> usize {
    let mut ev: Vec<(u64, i32)> = run
        .packets
        .iter()
        .flat_map(|p| [(p.t_in, 1), (p.t_done, -1)])
        .collect();
    ev.sort();
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in ev {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

fn vm_entries(vm: &Vm, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = vm.map(name).expect("the VM has the map").entries();
    v.sort();
    v
}

#[test]
fn counters_and_hash_entries_equal_the_vm_with_sixteen_engines_at_once() {
    let image = image_with_maps(COUNT, &COUNT_MAPS);
    let (vm, mut sw) = load(&image);
    let traffic = traffic();
    let run = offer_all(&mut sw, &traffic);
    assert_eq!(run.packets.len(), traffic.len());
    let conc = max_concurrent(&run);
    assert!(conc >= 8, "at most {conc} engines ran at once");
    let engines: std::collections::BTreeSet<usize> = run.packets.iter().map(|p| p.engine).collect();
    assert_eq!(engines.len(), PORTS * ENGINES, "every engine ran some");
    let mut calls_waited = 0;
    for (pkt, (port, f)) in run.packets.iter().zip(&traffic) {
        let want = vm.run(
            0,
            Context::Xdp(XdpMd {
                ingress_ifindex: *port as u32 + 1,
                ..XdpMd::new(f)
            }),
            &RunOptions::default(),
        );
        let r0 = *want.result.as_ref().expect("the VM runs it");
        // Short frames DROP, the rest TX: never ABORTED (another engine's
        // packet in this engine's per-CPU scratch).
        assert_eq!(pkt.result, Ok(r0), "packet {}", pkt.id);
        assert_eq!(r0, if f.len() < 34 { 1 } else { 3 }, "packet {}", pkt.id);
        assert_eq!(pkt.retired, want.insns, "packet {}", pkt.id);
        calls_waited += pkt.stalls.call;
    }
    assert!(calls_waited > 0);
    let value_waits: u64 = run.packets.iter().map(|p| p.stalls.values).sum();
    assert!(value_waits > 0, "the value port was never contended");
    // The shared maps hold what the VM's one-at-a-time run left.
    let totals = sw.map_entries(0).expect("entries");
    assert_eq!(totals, vm_entries(&vm, "totals"));
    let full = traffic.iter().filter(|(_, f)| f.len() >= 34).count() as u64;
    let bytes: u64 = traffic
        .iter()
        .filter(|(_, f)| f.len() >= 34)
        .map(|(_, f)| f.len() as u64)
        .sum();
    let mut want = full.to_le_bytes().to_vec();
    want.extend_from_slice(&bytes.to_le_bytes());
    assert_eq!(totals, vec![(0u32.to_le_bytes().to_vec(), want)]);
    let by_src = sw.map_entries(1).expect("entries");
    assert_eq!(by_src.len(), 24);
    assert_eq!(by_src, vm_entries(&vm, "by_src"));
}

#[test]
fn a_spin_lock_excludes_the_other_engines() {
    let maps = [("locked", MapType::Array, 4, 16, 1)];
    let traffic = traffic();
    let count_of = |sw: &mut Switch| {
        let v = sw.map_lookup(0, &0u32.to_le_bytes()).expect("lookup");
        let v = v.expect("an array has index 0");
        u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"))
    };
    let (vm, mut sw) = load(&image_with_maps(LOCKED, &maps));
    let run = offer_all(&mut sw, &traffic);
    assert!(max_concurrent(&run) >= 8);
    assert!(run.packets.iter().all(|p| p.result == Ok(3)));
    for (port, f) in &traffic {
        let ctx = XdpMd {
            ingress_ifindex: *port as u32 + 1,
            ..XdpMd::new(f)
        };
        vm.run(0, Context::Xdp(ctx), &RunOptions::default());
    }
    assert_eq!(count_of(&mut sw), traffic.len() as u64);
    assert_eq!(
        sw.map_entries(0).expect("entries"),
        vm_entries(&vm, "locked")
    );
    // The same program without the lock: engines interleave their loads
    // and stores, and increments are lost.
    let unlocked = LOCKED
        .replace("call 93", "r0 = 0")
        .replace("call 94", "r0 = 0");
    let (_, mut sw) = load(&image_with_maps(&unlocked, &maps));
    offer_all(&mut sw, &traffic);
    let lost = count_of(&mut sw);
    assert!(
        lost < traffic.len() as u64,
        "{lost} of {} without the lock",
        traffic.len()
    );
}

#[test]
fn the_host_edits_the_maps_between_runs_and_a_swap_keeps_their_layout() {
    let image = image_with_maps(COUNT, &COUNT_MAPS);
    let (_, mut sw) = load(&image);
    let src5 = [198u8, 18, 0, 5];
    sw.map_update(1, &src5, &100u64.to_le_bytes(), 0)
        .expect("host update");
    let traffic: Vec<(usize, Vec<u8>)> = (0..40).map(|i| (i % PORTS, frame(5, 64))).collect();
    offer_all(&mut sw, &traffic);
    let v = sw.map_lookup(1, &src5).expect("lookup").expect("present");
    assert_eq!(u64::from_le_bytes(v[..8].try_into().expect("8 bytes")), 140);
    sw.map_delete(1, &src5).expect("host delete");
    assert_eq!(sw.map_lookup(1, &src5).expect("lookup"), None);
    offer_all(&mut sw, &traffic[..3]);
    let v = sw.map_lookup(1, &src5).expect("lookup").expect("present");
    assert_eq!(u64::from_le_bytes(v[..8].try_into().expect("8 bytes")), 3);
    // A version with the same maps swaps in; one placing others is refused
    // by name, and the switch keeps running the current one.
    let same = Program::from_image(&image, 0).expect("subset");
    sw.stage(same).expect("same maps");
    let other = image_with_maps(COUNT, &[COUNT_MAPS[1], COUNT_MAPS[0], COUNT_MAPS[2]]);
    let e = sw
        .stage(Program::from_image(&other, 0).expect("subset"))
        .expect_err("other layout");
    assert!(e.to_string().contains("by_src, totals, scratch"), "{e}");
    offer_all(&mut sw, &traffic[..2]);
    let v = sw.map_lookup(1, &src5).expect("lookup").expect("present");
    assert_eq!(u64::from_le_bytes(v[..8].try_into().expect("8 bytes")), 5);
}
