//! What nfkit's NF wrapper needs of the core besides the ISA, each
//! against the VM: array values wider than a line (the per-CPU
//! `nfkit_frame`'s 504 bytes), atomics on map values (the statistics
//! counters), maps sized down below what they declare (a capacity fault
//! past the lines, never a different answer), `bpf_redirect` (the output
//! port) and `bpf_spin_lock`/`unlock`.

mod common;

use common::{compare, image_with_maps, rtl_run_xdp, vm_run_xdp};
use nfkit_object::MapType;
use nfkit_rtl::{Core, FaultKind, Program};
use nfkit_vm::{Redirect, Vm, VmConfig};

fn load(asm: &str, maps: &[(&str, MapType, u32, u32, u32)], cap: Option<u32>) -> (Vm, Core) {
    let image = image_with_maps(asm, maps);
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let prog = Program::from_image_sized(&image, 0, cap).expect("within the subset");
    (vm, Core::new(prog).expect("RTL model built"))
}

/// Frames of `n` bytes whose byte 0 is `tag`.
fn frame(tag: u8, n: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    f[0] = tag;
    f
}

/// Entry `key` (an array index) of `map` in the VM.
fn vm_value(vm: &Vm, map: &str, key: u32) -> Vec<u8> {
    vm.map(map)
        .expect("the VM has the map")
        .lookup(&key.to_le_bytes())
        .expect("lookup")
        .expect("an array has every index")
}

/// Looks up entry (byte 0 of the packet) mod 4 of a 504-byte array and
/// of an 80-byte one, writes the packet's bytes 8..16 at the wide value's
/// last 8 bytes, adds 3 atomically at its offset 8 (the fetch gives r0)
/// and copies the 80-byte value's first word plus the index to its last;
/// then updates entry 3 of the wide array with the whole looked-up value
/// (the coprocessor copies 504 bytes value to value).
const WIDE: &str = "
    r6 = *(u32 *)(r1 + 0)
    r2 = *(u32 *)(r1 + 4)
    r3 = r6
    r3 += 16
    if r3 > r2 goto out
    r7 = *(u8 *)(r6 + 0)
    r7 &= 3
    *(u32 *)(r10 - 4) = r7
    r1 = map_idx(0) ll
    r2 = r10
    r2 += -4
    call 1
    if r0 == 0 goto out
    r8 = r0
    r3 = *(u64 *)(r6 + 8)
    *(u64 *)(r8 + 496) = r3
    r0 = 3
    r0 = atomic_fetch_add((u64 *)(r8 + 8), r0)
    r9 = r0
    r1 = map_idx(1) ll
    r2 = r10
    r2 += -4
    call 1
    if r0 == 0 goto out
    r3 = *(u64 *)(r0 + 0)
    r3 += r7
    *(u64 *)(r0 + 72) = r3
    r3 = 3
    *(u32 *)(r10 - 8) = r3
    r1 = map_idx(0) ll
    r2 = r10
    r2 += -8
    r3 = r8
    r4 = 0
    call 2
    r0 += r9
    exit
out:
    r0 = 1
    exit
";

#[test]
fn wide_array_values_span_lines() {
    let maps = [
        ("frame", MapType::Array, 4, 504, 4),
        ("pktinfo", MapType::Array, 4, 80, 4),
    ];
    let (vm, mut core) = load(WIDE, &maps, None);
    for i in 0..24u8 {
        let f = frame(i, 64);
        let (want, _) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).unwrap_or_else(|e| panic!("packet {i}: {e}"));
    }
    for (map, idx) in [(0usize, "frame"), (1, "pktinfo")] {
        for key in 0..4u32 {
            let rtl = core
                .map_lookup(map, &key.to_le_bytes())
                .expect("host lookup")
                .expect("an array has every index");
            assert_eq!(rtl, vm_value(&vm, idx, key), "{idx}[{key}]");
        }
    }
    // The counters moved: 24 packets over 4 entries, 3 each time (entry
    // 3's counter is overwritten by its update from the stack).
    let v = core
        .map_lookup(0, &1u32.to_le_bytes())
        .expect("lookup")
        .expect("entry");
    assert_eq!(
        u64::from_le_bytes(v[8..16].try_into().expect("8 bytes")),
        18
    );
}

/// Inserts the packet's bytes 8..16 as a key into a hash declaring 4096
/// entries: r0 is the update's answer.
const INSERT: &str = "
    r6 = *(u32 *)(r1 + 0)
    r2 = *(u32 *)(r1 + 4)
    r3 = r6
    r3 += 16
    if r3 > r2 goto out
    r3 = *(u64 *)(r6 + 8)
    *(u64 *)(r10 - 8) = r3
    *(u64 *)(r10 - 16) = r3
    r1 = map_idx(0) ll
    r2 = r10
    r2 += -8
    r3 = r10
    r3 += -16
    r4 = 0
    call 2
    exit
out:
    r0 = 1
    exit
";

#[test]
fn sized_down_maps_fault_past_their_lines() {
    let maps = [("big", MapType::Hash, 8, 8, 4096)];
    let (vm, mut core) = load(INSERT, &maps, Some(4));
    let def = &core.program().maps.maps[0];
    assert_eq!((def.max_entries, def.declared), (4, 4096));
    for k in 0..4u8 {
        let mut f = frame(0, 64);
        f[8] = k;
        let (want, _) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).unwrap_or_else(|e| panic!("key {k}: {e}"));
        assert_eq!(got.result, Ok(0));
        // Updating an existing key needs no new line.
        let again = rtl_run_xdp(&mut core, &f);
        assert_eq!(again.result, Ok(0));
    }
    let mut f = frame(0, 64);
    f[8] = 9;
    let (want, _) = vm_run_xdp(&vm, &f);
    assert_eq!(want.r0, Some(0), "the VM's map has room");
    let got = rtl_run_xdp(&mut core, &f);
    let fault = got.result.expect_err("past the 4 lines");
    assert_eq!(fault.kind, FaultKind::Capacity);
    assert_eq!(core.map_entries(0).expect("entries").len(), 4);
    // Without the cap the loader refuses the map by name.
    let image = image_with_maps(INSERT, &maps);
    let e = Program::from_image(&image, 0)
        .expect_err("4096 entries exceed the lines")
        .to_string();
    assert!(e.contains("`big`") && e.contains("4096 entries"), "{e}");
}

#[test]
fn redirect_sets_the_output_port() {
    let asm = "r6 = *(u32 *)(r1 + 0)\nr7 = *(u8 *)(r6 + 0)\nr8 = *(u8 *)(r6 + 1)\nr1 = r7\nr2 = r8\ncall 23\nexit";
    let (vm, mut core) = load(asm, &[], None);
    for (port, flags) in [(7u8, 0u8), (3, 0), (5, 1)] {
        let mut f = frame(port, 64);
        f[1] = flags;
        let (want, redirect) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).expect("r0 equals the VM's");
        let vm_port = match redirect {
            Some(Redirect::Ifindex { ifindex, .. }) => Some(ifindex),
            None => None,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(got.out_port, vm_port, "port {port} flags {flags}");
        if flags == 0 {
            assert_eq!((got.result, got.out_port), (Ok(4), Some(port as u32)));
        } else {
            assert_eq!((got.result, got.out_port), (Ok(0), None));
        }
    }
}

#[test]
fn spin_locks_are_no_ops_on_map_values_only() {
    let lock = "
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
        r7 = 5
        lock *(u64 *)(r6 + 8) += r7
        r1 = r6
        call 94
        r0 = *(u64 *)(r6 + 8)
        exit
    out:
        r0 = 99
        exit
    ";
    let maps = [("locked", MapType::Array, 4, 16, 1)];
    let (vm, mut core) = load(lock, &maps, None);
    for n in 1..=3u64 {
        let f = frame(0, 64);
        let (want, _) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).expect("equal to the VM");
        assert_eq!(got.result, Ok(5 * n));
    }
    // A lock on the stack is no lock: the coprocessor refuses it.
    let (_, mut core) = load("r1 = r10\nr1 += -8\ncall 93\nr0 = 0\nexit", &[], None);
    let got = rtl_run_xdp(&mut core, &frame(0, 64));
    let fault = got.result.expect_err("not a map value");
    assert_eq!((fault.kind, fault.pc), (FaultKind::Helper, 2));
}
