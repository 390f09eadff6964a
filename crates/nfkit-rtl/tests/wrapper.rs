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

#[test]
fn lru_maps_fault_where_the_vm_would_evict() {
    let maps = [("lru", MapType::LruHash, 8, 8, 4)];
    let (vm, mut core) = load(INSERT, &maps, None);
    assert!(core.program().maps.maps[0].lru);
    for k in 0..4u8 {
        let mut f = frame(0, 64);
        f[8] = k;
        let (want, _) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).unwrap_or_else(|e| panic!("key {k}: {e}"));
        assert_eq!(got.result, Ok(0));
    }
    // Full: an existing key is still updated in place.
    let mut f = frame(0, 64);
    f[8] = 2;
    let (want, _) = vm_run_xdp(&vm, &f);
    let got = rtl_run_xdp(&mut core, &f);
    compare(&want, &got).expect("an update in place");
    let vm_keys = |vm: &Vm| vm.map("lru").expect("map").keys();
    let rtl_keys = |core: &mut Core| -> Vec<Vec<u8>> {
        core.map_entries(0)
            .expect("entries")
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    assert_eq!(rtl_keys(&mut core), vm_keys(&vm));
    // A new key: the VM evicts its least recently used entry, the core
    // (no use order) stops with a capacity fault rather than differ.
    f[8] = 9;
    let (want, _) = vm_run_xdp(&vm, &f);
    assert_eq!(want.r0, Some(0), "the VM evicts and inserts");
    assert_eq!(vm_keys(&vm).len(), 4);
    let got = rtl_run_xdp(&mut core, &f);
    let fault = got.result.expect_err("an eviction would be needed");
    assert_eq!(fault.kind, FaultKind::Capacity);
    assert_eq!(rtl_keys(&mut core).len(), 4);
}

/// `bpf_redirect_map(map 0, packet byte 0, packet byte 1)`.
const REDIRECT_MAP: &str = "
    r6 = *(u32 *)(r1 + 0)
    r2 = *(u8 *)(r6 + 0)
    r3 = *(u8 *)(r6 + 1)
    r1 = map_idx(0) ll
    call 51
    exit
";

#[test]
fn redirect_map_on_a_devmap_matches_the_vm() {
    let maps = [("ports", MapType::Devmap, 4, 4, 8)];
    let (vm, mut core) = load(REDIRECT_MAP, &maps, None);
    for (k, port) in [(2u32, 7u32), (5, 3)] {
        vm.map("ports")
            .expect("map")
            .update(&k.to_le_bytes(), &port.to_le_bytes(), 0)
            .expect("VM update");
        core.map_update(0, &k.to_le_bytes(), &port.to_le_bytes(), 0)
            .expect("RTL update");
    }
    // Past the devmap's size, and BPF_NOEXIST: refused as by the VM.
    assert!(core
        .map_update(0, &8u32.to_le_bytes(), &[1, 0, 0, 0], 0)
        .is_err());
    assert!(core
        .map_update(0, &1u32.to_le_bytes(), &[1, 0, 0, 0], 1)
        .is_err());
    let cases = [
        (2u8, 0u8, 4u64), // present: XDP_REDIRECT to entry 2
        (5, 0, 4),
        (3, 0, 0),      // absent: the low flag bits (XDP_ABORTED)
        (3, 2, 2),      // absent, XDP_PASS as the fallback
        (0, 8, 4),      // broadcast
        (0, 8 | 16, 4), // broadcast excluding the ingress port
        (2, 32, 0),     // an unknown flag aborts
    ];
    for (key, flags, code) in cases {
        let mut f = frame(key, 64);
        f[1] = flags;
        let (want, redirect) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).unwrap_or_else(|e| panic!("key {key} flags {flags}: {e}"));
        assert_eq!(got.result, Ok(code), "key {key} flags {flags}");
        assert_eq!(
            got.redirect,
            redirect.and_then(common::vm_redirect),
            "key {key} flags {flags}"
        );
    }
    let f = frame(0, 64);
    let got = rtl_run_xdp(&mut core, &{
        let mut g = f.clone();
        g[1] = 8 | 16;
        g
    });
    assert_eq!(
        got.redirect,
        Some(nfkit_rtl::Redirect::Broadcast {
            map: 0,
            exclude_ingress: true
        })
    );
    // A map call on a devmap is not served: the core faults.
    let lookup = "r1 = 0\n*(u32 *)(r10 - 4) = r1\nr2 = r10\nr2 += -4\nr1 = map_idx(0) ll\ncall 1\nr0 = 0\nexit";
    let (_, mut core) = load(lookup, &maps, None);
    let got = rtl_run_xdp(&mut core, &f);
    assert_eq!(got.result.expect_err("not served").kind, FaultKind::Helper);
}

/// `bpf_xdp_adjust_meta(ctx, byte 1 - byte 0)`; on success writes a
/// word at the new data_meta, reads it back and answers
/// `(data - data_meta) << 32 | the word`, else the helper's errno.
const ADJUST_META: &str = "
    r6 = r1
    r7 = *(u32 *)(r1 + 0)
    r2 = *(u8 *)(r7 + 1)
    r3 = *(u8 *)(r7 + 0)
    r2 -= r3
    call 54
    if r0 != 0 goto out
    r7 = *(u32 *)(r6 + 0)
    r8 = *(u32 *)(r6 + 8)
    r3 = r7
    r3 -= r8
    r4 = r8
    r4 += 4
    if r4 > r7 goto nometa
    r5 = 0x5a5a1234
    *(u32 *)(r8 + 0) = r5
    r4 = *(u32 *)(r8 + 0)
    r0 = r3
    r0 <<= 32
    r0 |= r4
    exit
nometa:
    r0 = r3
out:
    exit
";

#[test]
fn adjust_meta_moves_data_meta_as_the_vm() {
    let (vm, mut core) = load(ADJUST_META, &[], None);
    // (byte 0, byte 1): grow by 4, 8, 32; 0 (no metadata); 36 and 6
    // (EACCES: over 32 or not a multiple of 4); 250 (below the frame's
    // floor) and a move past data (EINVAL).
    for (grow, shrink) in [
        (4u8, 0u8),
        (8, 0),
        (32, 0),
        (0, 0),
        (36, 0),
        (6, 0),
        (250, 0),
        (0, 4),
    ] {
        let mut f = frame(grow, 64);
        f[1] = shrink;
        let (want, _) = vm_run_xdp(&vm, &f);
        let got = rtl_run_xdp(&mut core, &f);
        compare(&want, &got).unwrap_or_else(|e| panic!("delta -{grow} +{shrink}: {e}"));
        let r0 = got.result.expect("runs");
        match (grow, shrink) {
            (0, 0) => assert_eq!(r0, 0),
            (36 | 6, 0) => assert_eq!(r0 as i64, -13),
            (250, _) | (_, 4) => assert_eq!(r0 as i64, -22),
            (g, _) => assert_eq!(r0, (u64::from(g) << 32) | 0x5a5a_1234),
        }
    }
}
