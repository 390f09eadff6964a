//! Isolation inside VM memory (issue 13 items 1 and 2): every stack
//! access is bounded by the frame its pointer was made for, every map
//! value pointer by its one value. The programs of `isolation/progs.rs`
//! fault (the kernel refuses them at load time: nfkit-kernel's
//! `tests/vm_isolation.rs`); the programs here that stay inside their
//! bounds run.

#[path = "isolation/progs.rs"]
mod progs;

use nfkit_object::{MapKind, MapType};
use nfkit_vm::{Context, LoadError, Rule, RunErrorKind, RunOptions, Vm, VmConfig, XdpMd};

fn vm(name: &str, asm: &str, maps: &[(MapType, u32, u32)]) -> Vm {
    Vm::new(&progs::image(name, asm, maps), VmConfig::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn run(vm: &Vm) -> Result<u64, nfkit_vm::RunError> {
    vm.run(
        0usize,
        Context::Xdp(XdpMd::new(&[0u8; 60])),
        &RunOptions::default(),
    )
    .result
}

#[test]
fn out_of_bounds_accesses_fault_on_every_run() {
    let mut wrong = Vec::new();
    for b in progs::bad() {
        let vm = vm(b.name, b.asm, b.maps);
        progs::fill_neighbours(&vm);
        for i in 0..3 {
            match run(&vm) {
                Err(e)
                    if matches!(e.kind, RunErrorKind::Access { .. })
                        && e.to_string().contains(b.vm) => {}
                other => wrong.push(format!(
                    "{} run {i}: {other:?}, want a fault with `{}`",
                    b.name, b.vm
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn stack_leak_faults_naming_the_frame() {
    let vm = vm("stack_leak", progs::STACK_LEAK, &[]);
    for _ in 0..3 {
        let err = run(&vm).expect_err("outside the frame");
        assert_eq!(err.fault_code, 0, "XDP_ABORTED");
        assert!(
            err.to_string().contains("(stack frame 0, fp-4000)"),
            "{err}"
        );
    }
}

#[test]
fn whole_frames_and_caller_pointers_work() {
    // Depth 0 fills its frame's last and first bytes and passes both down
    // to depth 2, which writes its own frame end to end and reads the
    // caller's bytes: 0x11 + 0x22 + 512 bytes of 1 = 563.
    let asm = "
        r1 = 0x11
        *(u8 *)(r10 - 512) = r1
        r1 = 0x22
        *(u8 *)(r10 - 1) = r1
        r1 = r10
        r1 += -512
        call mid
        exit
    mid:
        r2 = 5
        *(u64 *)(r10 - 512) = r2
        call leaf
        r2 = *(u64 *)(r10 - 512)
        r0 += r2
        r0 -= 5
        exit
    leaf:
        r2 = 0
    fill:
        r3 = r10
        r3 += -512
        r3 += r2
        r4 = 1
        *(u8 *)(r3 + 0) = r4
        r2 += 1
        if r2 < 512 goto fill
        r0 = 0
        r2 = 0
    sum:
        r3 = r10
        r3 += -512
        r3 += r2
        r4 = *(u8 *)(r3 + 0)
        r0 += r4
        r2 += 1
        if r2 < 512 goto sum
        r4 = *(u8 *)(r1 + 0)
        r0 += r4
        r4 = *(u8 *)(r1 + 511)
        r0 += r4
        exit";
    let vm = vm("frames", asm, &[]);
    for _ in 0..3 {
        assert_eq!(run(&vm).expect("inside every frame"), 563);
    }
}

#[test]
fn a_returned_frame_is_not_reachable() {
    // The callee returns a pointer into its frame; after the return the
    // frame is not live, and its bytes are out of reach.
    let asm = "
        call sub
        r0 = *(u64 *)(r0 + 0)
        exit
    sub:
        r1 = 9
        *(u64 *)(r10 - 8) = r1
        r0 = r10
        r0 += -8
        exit";
    let err = run(&vm("dangling", asm, &[])).expect_err("dangling frame pointer");
    assert!(err.to_string().contains("stack frame 1, not live"), "{err}");
}

#[test]
fn a_forged_pointer_to_a_deeper_frame_faults() {
    let asm = "
        r2 = 0x300000000 ll
        r1 = r10
        r1 += r2
        r0 = 1
        *(u64 *)(r1 - 8) = r0
        exit";
    let err = run(&vm("forged", asm, &[])).expect_err("frame 3 is not live");
    assert!(err.to_string().contains("stack frame 3, not live"), "{err}");
}

#[test]
fn map_values_are_reachable_up_to_their_last_byte() {
    for t in [MapType::Array, MapType::PercpuArray, MapType::Hash] {
        // Value of 12 bytes: read the last 4, write the first 8.
        let asm = "
            r1 = 0
            *(u32 *)(r10 - 4) = r1
            r2 = r10
            r2 += -4
            r1 = map_idx(0) ll
            call 1
            if r0 == 0 goto out
            r1 = 0x0102030405060708 ll
            *(u64 *)(r0 + 0) = r1
            r0 = *(u32 *)(r0 + 8)
            exit
        out:
            r0 = 0
            exit";
        let vm = vm("in_bounds", asm, &[(t, 12, 4)]);
        let m = vm.map("m0").expect("map");
        let mut value = [0u8; 12];
        value[8..].copy_from_slice(&77u32.to_le_bytes());
        if t == MapType::PercpuArray {
            let all: Vec<u8> = (0..vm.config().ncpus)
                .flat_map(|_| value.iter().copied().chain([0; 4]))
                .collect();
            m.update(&0u32.to_le_bytes(), &all, 0).expect("update");
        } else {
            m.update(&0u32.to_le_bytes(), &value, 0).expect("update");
        }
        assert_eq!(run(&vm).expect("in bounds"), 77, "{t:?}");
        let now = m.lookup_cpu(&0u32.to_le_bytes(), 0).expect("lookup");
        assert_eq!(
            now.as_deref().map(|v| &v[..8]),
            Some(&0x0102030405060708u64.to_le_bytes()[..]),
            "{t:?}"
        );
    }
}

#[test]
fn many_lookups_in_one_run_keep_one_region_per_value() {
    // 2000 lookups over 500 elements: each pointer addresses its own value
    // (the index of values looked up takes over from the linear search).
    let asm = "
        r6 = 0
        r7 = 0
    next:
        r1 = r6
        r1 %= 500
        *(u32 *)(r10 - 4) = r1
        r2 = r10
        r2 += -4
        r1 = map_idx(0) ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r0 + 0)
        r7 += r1
        r1 = r6
        *(u32 *)(r0 + 0) = r1
        r6 += 1
        if r6 < 2000 goto next
    out:
        r0 = r7
        exit";
    let vm = vm("many", asm, &[(MapType::Array, 4, 500)]);
    // Round k reads what round k-1 wrote: sum over i >= 500 of (i - 500).
    let want: u64 = (500..2000u64).map(|i| i - 500).sum();
    assert_eq!(run(&vm).expect("in bounds"), want);
}

fn kernel_load(name: &str, asm: &str, maps: &[(MapType, u32, u32)]) -> Result<Vm, LoadError> {
    Vm::new(&progs::image(name, asm, maps), VmConfig::kernel())
}

#[test]
fn kernel_profile_refuses_at_load_what_is_out_of_bounds_on_every_value() {
    let mut wrong = Vec::new();
    for b in progs::bad() {
        let got = kernel_load(b.name, b.asm, b.maps);
        match (b.load, got) {
            (Some(want), Err(e)) if e.to_string().contains(want) => {
                assert!(
                    matches!(
                        e.rule(),
                        Some(Rule::StackAccess | Rule::MapValueAccess | Rule::MemAccess)
                    ),
                    "{}: {e}",
                    b.name
                );
                println!("{:<36} {e}", b.name);
            }
            // A constant offset past 512 bytes breaks the stack budget.
            (None, Err(e)) if e.rule() == Some(Rule::StackSize) => {}
            // Only possibly out of bounds: loads, faults when it runs.
            (None, Ok(vm)) => match run(&vm) {
                Err(e) if e.to_string().contains(b.vm) => {}
                other => wrong.push(format!("{}: {other:?}, want a fault", b.name)),
            },
            (want, got) => wrong.push(format!(
                "{}: want {want:?}, got {:?}",
                b.name,
                got.map(|_| "loaded")
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn kernel_profile_names_the_instruction_it_refuses() {
    let err = kernel_load("stack_leak", progs::STACK_LEAK, &[]).expect_err("out of frame");
    assert_eq!(err.rule(), Some(Rule::StackAccess));
    // The load at slot 5 of the program (`stack_leak+5`).
    assert!(
        err.to_string()
            .starts_with("instruction 5 (stack_leak+5): "),
        "{err}"
    );
}

#[test]
fn kernel_profile_loads_bounded_loops_and_checked_indexes() {
    // A loop over the whole frame, an index into a 16-byte value bounded
    // by a check, a value pointer chosen on two paths: all in bounds.
    let asm = "
        r2 = 0
    fill:
        r3 = r10
        r3 += -512
        r3 += r2
        r4 = 1
        *(u8 *)(r3 + 0) = r4
        r2 += 1
        if r2 < 512 goto fill
        r1 = 0
        *(u32 *)(r10 - 4) = r1
        r2 = r10
        r2 += -4
        r1 = map_idx(0) ll
        call 1
        if r0 == 0 goto out
        r6 = r0
        r1 = *(u32 *)(r6 + 0)
        if r1 > 12 goto out
        r6 += r1
        r0 = *(u32 *)(r6 + 0)
        exit
    out:
        r0 = 0
        exit";
    let vm = kernel_load("bounded", asm, &[(MapType::Array, 16, 1)]).expect("in bounds");
    assert_eq!(run(&vm).expect("runs"), 0);
    // The same index unchecked may be in bounds: left to run time.
    let unchecked = asm.replace("if r1 > 12 goto out", "r1 &= 0xff");
    kernel_load("unchecked", &unchecked, &[(MapType::Array, 16, 1)]).expect("possibly in bounds");
    // Checked against the wrong bound: every index is past the value.
    let past = asm.replace("if r1 > 12 goto out", "if r1 < 16 goto out");
    let err = kernel_load("past", &past, &[(MapType::Array, 16, 1)]).expect_err("past the value");
    assert!(
        err.to_string()
            .contains("invalid access to map value, value_size=16 off=16 size=4"),
        "{err}"
    );
}

#[test]
fn a_path_the_kernel_never_takes_is_not_refused() {
    // r1 is 3: the branch to the bad access is never taken, and the
    // kernel, which knows r1, accepts the program.
    let asm = "
        r1 = 3
        if r1 > 5 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit";
    let vm = kernel_load("dead", asm, &[]).expect("dead path");
    assert_eq!(run(&vm).expect("runs"), 2);
    // Nor does its stack count for the 512-byte budget.
    let deep = asm.replace("r10 + 8", "r10 - 600");
    let vm = kernel_load("dead_deep", &deep, &[]).expect("dead path");
    assert_eq!(run(&vm).expect("runs"), 2);
}

#[test]
fn kernel_profile_checks_the_keys_map_helpers_read() {
    // A 4-byte key 600 bytes below the frame pointer.
    let asm = "
        r2 = r10
        r2 += -600
        r1 = map_idx(0) ll
        call 1
        r0 = 0
        exit";
    let err = kernel_load("key", asm, &[(MapType::Array, 4, 1)]).expect_err("key out of frame");
    assert_eq!(err.rule(), Some(Rule::StackAccess));
    assert!(
        err.to_string()
            .contains("invalid read from stack R2 off=-600 size=4"),
        "{err}"
    );
    // The same key inside the frame loads.
    let inside = asm.replace("-600", "-8");
    kernel_load("key_inside", &inside, &[(MapType::Array, 4, 1)]).expect("key in frame");
}

#[test]
fn an_access_out_of_bounds_on_one_path_only_faults_at_run_time() {
    // Offset 0 when the rx queue is 0, else 8: joined, 0..=8, which the
    // 4-byte read of a 4-byte value survives only at 0. The kernel checks
    // each path (and refuses the second); the VM loads and faults when a
    // run takes it.
    let asm = "
        r6 = *(u32 *)(r1 + 16)
        r1 = 0
        *(u32 *)(r10 - 4) = r1
        r2 = r10
        r2 += -4
        r1 = map_idx(0) ll
        call 1
        if r0 == 0 goto out
        r1 = 0
        if r6 == 0 goto read
        r1 = 8
    read:
        r0 += r1
        r0 = *(u32 *)(r0 + 0)
        exit
    out:
        r0 = 0
        exit";
    let vm = kernel_load("one_path", asm, &[(MapType::Array, 4, 2)]).expect("possibly in bounds");
    progs::fill_neighbours(&vm);
    let run_on = |queue: u32| {
        let mut md = XdpMd::new(&[0u8; 60]);
        md.rx_queue_index = queue;
        vm.run(0usize, Context::Xdp(md), &RunOptions::default())
            .result
    };
    assert_eq!(run_on(0).expect("in bounds"), 0x11);
    let err = run_on(1).expect_err("element 1 is outside the value");
    assert!(err.to_string().contains("value_size=4 off=8"), "{err}");
}

#[test]
fn read_only_globals_rule_out_branches_as_in_the_kernel() {
    // `if (level > 3)` on a `.rodata` variable: the kernel reads frozen
    // read-only data as constants, so with level 0 it never looks at the
    // access above the frame pointer; with level 5, or when the variable
    // is writable (`.data`), it does and refuses.
    let asm = "
        r1 = map_idx_value(0, 0) ll
        r2 = *(u32 *)(r1 + 0)
        if r2 > 3 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit";
    let load = |level: u32, read_only: bool| {
        let mut img = progs::image("rodata", asm, &[(MapType::Array, 4, 1)]);
        img.maps[0].kind = MapKind::Global {
            section: if read_only { ".rodata" } else { ".data" }.into(),
            read_only,
        };
        img.maps[0].data = Some(level.to_le_bytes().to_vec());
        Vm::new(&img, VmConfig::kernel())
    };
    let vm = load(0, true).expect("the branch is ruled out");
    assert_eq!(run(&vm).expect("runs"), 2);
    for (level, read_only) in [(5, true), (0, false)] {
        let err = load(level, read_only).expect_err("the branch may be taken");
        assert!(
            err.to_string()
                .contains("invalid read from stack R10 off=8 size=8"),
            "{err}"
        );
    }
}
