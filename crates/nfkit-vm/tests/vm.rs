//! Behaviour of the VM on hand-written programs: ISA semantics, load-time
//! rejections, memory safety, contexts, maps, helpers, limits.

mod common;

use common::*;
use nfkit_isa::{AluOp, AtomicOp, Cond, Insn, Size};
use nfkit_object::{MapType, ProgType};
use nfkit_vm::{Context, FixedClock, Rule, RunErrorKind, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use std::sync::Arc;

fn run_raw(insns: Vec<Insn>, mem: &[u8]) -> nfkit_vm::RunResult {
    let vm = Vm::new(&image(ProgType::Unspec, insns, vec![]), VmConfig::default()).expect("loads");
    vm.run(0, Context::Raw(mem), &RunOptions::default())
}

fn r0(insns: Vec<Insn>) -> u64 {
    let res = run_raw(insns, &[]);
    res.r0()
        .unwrap_or_else(|| panic!("run failed: {:?}", res.result))
}

fn load_err(insns: Vec<Insn>) -> Rule {
    let e = Vm::new(&image(ProgType::Unspec, insns, vec![]), VmConfig::kernel())
        .expect_err("must be rejected");
    e.rule()
        .unwrap_or_else(|| panic!("not an instruction error: {e}"))
}

#[test]
fn arithmetic_edge_cases() {
    // x / 0 = 0, x % 0 = x (64 and 32 bit, register divisor).
    assert_eq!(
        r0(vec![mov(0, 7), mov(1, 0), alu64r(AluOp::Div, 0, 1), exit()]),
        0
    );
    assert_eq!(
        r0(vec![mov(0, 7), mov(1, 0), alu64r(AluOp::Mod, 0, 1), exit()]),
        7
    );
    assert_eq!(
        r0(vec![
            lddw(0, u64::MAX),
            mov(1, 0),
            alu32r(AluOp::Mod, 0, 1),
            exit()
        ]),
        0xffff_ffff
    );
    // INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0.
    assert_eq!(
        r0(vec![
            lddw(0, i64::MIN as u64),
            alu64(AluOp::SDiv, 0, -1),
            exit()
        ]),
        i64::MIN as u64
    );
    assert_eq!(
        r0(vec![
            lddw(0, i64::MIN as u64),
            alu64(AluOp::SMod, 0, -1),
            exit()
        ]),
        0
    );
    assert_eq!(
        r0(vec![mov(0, i32::MIN), alu32(AluOp::SDiv, 0, -1), exit()]),
        0x8000_0000
    );
    // Shifts are masked.
    assert_eq!(
        r0(vec![
            mov(0, 1),
            mov(1, 65),
            alu64r(AluOp::Lsh, 0, 1),
            exit()
        ]),
        2
    );
    assert_eq!(
        r0(vec![
            mov(0, 1),
            mov(1, 33),
            alu32r(AluOp::Lsh, 0, 1),
            exit()
        ]),
        2
    );
    // 32-bit ops zero the upper half; movsx; bswap.
    assert_eq!(
        r0(vec![lddw(0, u64::MAX), alu32(AluOp::Add, 0, 1), exit()]),
        0
    );
    assert_eq!(
        r0(vec![mov(1, 0x80), alu64r(AluOp::MovSx(8), 0, 1), exit()]),
        (-128i64) as u64
    );
    assert_eq!(
        r0(vec![
            lddw(0, 0x1122_3344_5566_7788),
            Insn::Endian {
                order: nfkit_isa::ByteOrder::Be,
                bits: 16,
                dst: r(0)
            },
            exit()
        ]),
        0x8877
    );
    // Arithmetic shift right of a negative 32-bit value.
    assert_eq!(
        r0(vec![mov(0, -8), alu32(AluOp::Arsh, 0, 1), exit()]),
        0xffff_fffc
    );
}

#[test]
fn atomics_on_the_stack() {
    let prog = vec![
        st(Size::DW, 10, -8, 40),
        mov(1, 2),
        Insn::Atomic {
            size: Size::DW,
            op: AtomicOp::Add { fetch: true },
            dst: r(10),
            src: r(1),
            off: -8,
        },
        // r1 = 40 (old); memory 42
        mov(0, 42),
        mov(2, 7),
        Insn::Atomic {
            size: Size::DW,
            op: AtomicOp::CmpXchg,
            dst: r(10),
            src: r(2),
            off: -8,
        },
        // r0 = 42 (old), memory 7
        ldx(Size::DW, 3, 10, -8),
        alu64r(AluOp::Add, 0, 3),
        alu64r(AluOp::Add, 0, 1),
        exit(),
    ];
    assert_eq!(r0(prog), 42 + 7 + 40);
}

#[test]
fn load_time_rules() {
    assert_eq!(load_err(vec![ja(5), exit()]), Rule::JumpTarget);
    assert_eq!(
        load_err(vec![ja(1), lddw(0, 1), exit()]),
        Rule::JumpTarget,
        "into an lddw"
    );
    assert_eq!(load_err(vec![movr(0, 3), exit()]), Rule::UninitRead);
    assert_eq!(
        load_err(vec![mov(10, 0), mov(0, 0), exit()]),
        Rule::FramePointerWrite
    );
    assert_eq!(
        load_err(vec![mov(0, 0), call(9999), exit()]),
        Rule::UnknownHelper
    );
    assert_eq!(load_err(vec![mov(0, 0)]), Rule::FallOff);
    assert_eq!(
        load_err(vec![map_ptr(1, 3), mov(0, 0), exit()]),
        Rule::MapIndex
    );
    assert_eq!(
        load_err(vec![mov(0, 1), alu64(AluOp::Div, 0, 0), exit()]),
        Rule::DivByZero
    );
    assert_eq!(
        load_err(vec![call_local(-1), mov(0, 0), exit()]),
        Rule::Recursion
    );
    // Nine nested calls: main + 8 callees = 9 frames.
    let mut deep = vec![];
    for _ in 0..9 {
        deep.extend([call_local(1), exit()]);
    }
    deep.extend([mov(0, 0), exit()]);
    assert_eq!(load_err(deep), Rule::CallDepth);
    // An access 600 bytes below the frame pointer in kernel mode: out of
    // the 512-byte frame (the kernel's "invalid write to stack").
    assert_eq!(
        load_err(vec![st(Size::DW, 10, -600, 0), mov(0, 0), exit()]),
        Rule::StackAccess
    );
    // 320 + 320 bytes over a call path in kernel mode.
    assert_eq!(
        load_err(vec![
            st(Size::DW, 10, -300, 0),
            call_local(1),
            exit(),
            st(Size::DW, 10, -300, 0),
            mov(0, 0),
            exit()
        ]),
        Rule::StackSize
    );
    // A read uninitialised only on one path is not provably wrong.
    let maybe = vec![jmp(Cond::Eq, 1, 0, 1), mov(2, 1), movr(0, 2), exit()];
    assert!(Vm::new(&image(ProgType::Unspec, maybe, vec![]), VmConfig::default()).is_ok());
    // Errors name the instruction.
    let e = Vm::new(
        &image(
            ProgType::Unspec,
            vec![mov(0, 0), movr(0, 4), exit()],
            vec![],
        ),
        VmConfig::default(),
    )
    .expect_err("rejected");
    assert!(e.to_string().starts_with("instruction 1 (prog+1)"), "{e}");
}

#[test]
fn out_of_region_access_is_a_fault_naming_the_address() {
    let res = run_raw(vec![ldx(Size::W, 0, 1, 100), exit()], &[1, 2, 3, 4]);
    let e = res.result.expect_err("faults");
    assert_eq!(e.slot, 0);
    match e.kind {
        RunErrorKind::Access {
            addr, size, write, ..
        } => {
            assert_eq!((addr & 0xffff_ffff, size, write), (100, 4, false));
        }
        k => panic!("unexpected {k:?}"),
    }
    // A pointer made up from an integer.
    let res = run_raw(
        vec![
            lddw(1, 0x7fff_0000_1000),
            stx(Size::DW, 1, 1, 0),
            mov(0, 0),
            exit(),
        ],
        &[],
    );
    assert!(matches!(
        res.result.expect_err("faults").kind,
        RunErrorKind::Access { write: true, .. }
    ));
    // Below the stack frame of the entry.
    let res = run_raw(vec![ldx(Size::DW, 0, 10, 0), exit()], &[]);
    assert!(res.result.is_err());
}

#[test]
fn budget_stops_runaway_programs() {
    let vm = Vm::new(
        &image(ProgType::Unspec, vec![mov(0, 0), ja(-1), exit()], vec![]),
        VmConfig::default(),
    )
    .expect("loads");
    let res = vm.run(
        0,
        Context::Empty,
        &RunOptions {
            budget: Some(1000),
            ..Default::default()
        },
    );
    assert!(matches!(
        res.result.expect_err("stops").kind,
        RunErrorKind::Budget { limit: 1000 }
    ));
    assert_eq!(res.insns, 1001);
}

fn xdp_vm(insns: Vec<Insn>, maps: Vec<nfkit_object::MapSpec>) -> Vm {
    Vm::new(&image(ProgType::Xdp, insns, maps), VmConfig::kernel()).expect("loads")
}

#[test]
fn xdp_context_pointers_and_refusals() {
    // return data_end - data (packet length) after a bounds-checked read
    let prog = vec![
        ldx(Size::W, 2, 1, 0),
        ldx(Size::W, 3, 1, 4),
        movr(0, 3),
        alu64r(AluOp::Sub, 0, 2),
        ldx(Size::B, 4, 2, 23),   // IP protocol
        alu64r(AluOp::Lsh, 4, 4), // scramble nothing: r4 = 17 << 17
        exit(),
    ];
    let vm = xdp_vm(prog, vec![]);
    let f = udp_frame(60);
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(60));
    assert_eq!(res.packet, f);
    // Narrow load of data, 8-byte load, store: refused.
    for bad in [
        vec![ldx(Size::H, 0, 1, 0), exit()],
        vec![ldx(Size::DW, 0, 1, 0), exit()],
        vec![st(Size::W, 1, 12, 0), mov(0, 0), exit()],
        vec![ldx(Size::W, 0, 1, 20), exit()],
    ] {
        let vm = xdp_vm(bad, vec![]);
        let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
        assert_eq!(res.code(), 0, "fault = XDP_ABORTED");
        assert!(matches!(
            res.result.expect_err("refused").kind,
            RunErrorKind::Context { .. }
        ));
    }
    // Reading past data_end faults.
    let vm = xdp_vm(
        vec![ldx(Size::W, 2, 1, 4), ldx(Size::B, 0, 2, 0), exit()],
        vec![],
    );
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert!(matches!(
        res.result.expect_err("faults").kind,
        RunErrorKind::Access { .. }
    ));
}

#[test]
fn xdp_adjust_head_tail_meta() {
    use nfkit_vm::helpers::table::id;
    let prog = vec![
        movr(6, 1),
        mov(2, -4),
        call(id::XDP_ADJUST_HEAD),
        movr(1, 6),
        mov(2, -8),
        call(id::XDP_ADJUST_META),
        movr(1, 6),
        mov(2, 6),
        call(id::XDP_ADJUST_TAIL),
        // write 0xab at the new first byte
        ldx(Size::W, 2, 6, 0),
        ldx(Size::W, 3, 6, 4),
        movr(4, 2),
        alu64(AluOp::Add, 4, 1),
        jmpr(Cond::Gt, 4, 3, 1),
        st(Size::B, 2, 0, 0xab),
        // metadata word
        ldx(Size::W, 4, 6, 8),
        movr(5, 4),
        alu64(AluOp::Add, 5, 4),
        jmpr(Cond::Gt, 5, 2, 1),
        st(Size::W, 4, 0, 0x11223344),
        mov(0, 2),
        exit(),
    ];
    let vm = xdp_vm(prog, vec![]);
    let f = udp_frame(50);
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(2), "{:?}", res.result);
    assert_eq!(res.head_delta, -4);
    assert_eq!(res.packet.len(), 4 + 50 + 6);
    assert_eq!(res.packet[0], 0xab);
    assert_eq!(&res.packet[4..54], &f[..]);
    assert_eq!(&res.packet[54..], &[0u8; 6]);
    assert_eq!(res.meta, vec![0x44, 0x33, 0x22, 0x11, 0, 0, 0, 0]);
}

#[test]
fn hash_map_from_program_and_control_plane() {
    use nfkit_vm::helpers::table::id;
    // key = 7 (u32 on stack); value = lookup or insert 1, then atomic add 1.
    let prog = vec![
        st(Size::W, 10, -4, 7),
        map_ptr(1, 0),
        movr(2, 10),
        alu64(AluOp::Add, 2, -4),
        call(id::MAP_LOOKUP_ELEM),
        jmp(Cond::Eq, 0, 0, 4),
        mov(1, 1),
        Insn::Atomic {
            size: Size::DW,
            op: AtomicOp::Add { fetch: false },
            dst: r(0),
            src: r(1),
            off: 0,
        },
        mov(0, 1),
        exit(),
        st(Size::DW, 10, -16, 100),
        map_ptr(1, 0),
        movr(2, 10),
        alu64(AluOp::Add, 2, -4),
        movr(3, 10),
        alu64(AluOp::Add, 3, -16),
        mov(4, 1), // BPF_NOEXIST
        call(id::MAP_UPDATE_ELEM),
        exit(),
    ];
    let vm = Vm::new(
        &image(
            ProgType::Xdp,
            prog,
            vec![map("counts", MapType::Hash, 4, 8, 16)],
        ),
        VmConfig::kernel(),
    )
    .expect("loads");
    let f = udp_frame(60);
    let m = vm.map("counts").expect("map").clone();
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(0), "inserted");
    assert_eq!(
        m.lookup(&7u32.to_le_bytes()).expect("ok"),
        Some(100u64.to_le_bytes().to_vec())
    );
    // Four threads, 2500 runs each: every increment counted exactly.
    let threads: Vec<_> = (0..4)
        .map(|cpu| {
            let vm = vm.clone();
            let f = f.clone();
            std::thread::spawn(move || {
                let mut runner = vm.runner();
                for _ in 0..2500 {
                    let res = runner.run(
                        0,
                        Context::Xdp(XdpMd::new(&f)),
                        &RunOptions {
                            cpu,
                            ..Default::default()
                        },
                    );
                    assert_eq!(res.r0(), Some(1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert_eq!(
        m.lookup(&7u32.to_le_bytes()).expect("ok"),
        Some(10_100u64.to_le_bytes().to_vec())
    );
    // Control plane: flags and errors as in the kernel.
    use nfkit_vm::maps::{BPF_EXIST, BPF_NOEXIST};
    assert_eq!(
        m.update(&7u32.to_le_bytes(), &[0; 8], BPF_NOEXIST)
            .map_err(|e| e.errno()),
        Err(17)
    );
    assert_eq!(
        m.update(&8u32.to_le_bytes(), &[0; 8], BPF_EXIST)
            .map_err(|e| e.errno()),
        Err(2)
    );
    m.delete(&7u32.to_le_bytes()).expect("deleted");
    assert_eq!(m.delete(&7u32.to_le_bytes()).map_err(|e| e.errno()), Err(2));
    for k in 0..16u32 {
        m.update(&k.to_le_bytes(), &[1; 8], 0).expect("fits");
    }
    assert_eq!(
        m.update(&99u32.to_le_bytes(), &[1; 8], 0)
            .map_err(|e| e.errno()),
        Err(7)
    );
    assert_eq!(m.keys().len(), 16);
}

#[test]
fn lru_evicts_least_recently_used() {
    let vm = Vm::new(
        &image(
            ProgType::Unspec,
            vec![mov(0, 0), exit()],
            vec![map("lru", MapType::LruHash, 4, 4, 3)],
        ),
        VmConfig::default(),
    )
    .expect("loads");
    let m = vm.map("lru").expect("map");
    for k in 0..3u32 {
        m.update(&k.to_le_bytes(), &k.to_le_bytes(), 0)
            .expect("insert");
    }
    // Touch 0 so 1 is the least recently used.
    m.prog_lookup(&0u32.to_le_bytes(), 0).expect("present");
    m.update(&9u32.to_le_bytes(), &[9, 0, 0, 0], 0)
        .expect("evicts");
    let mut keys: Vec<u32> = m
        .keys()
        .iter()
        .map(|k| u32::from_le_bytes([k[0], k[1], k[2], k[3]]))
        .collect();
    keys.sort();
    assert_eq!(keys, vec![0, 2, 9]);
}

#[test]
fn percpu_array_values_per_cpu() {
    use nfkit_vm::helpers::table::id;
    // Store cpu id + 1 into this CPU's value.
    let prog2 = vec![
        st(Size::W, 10, -4, 0),
        map_ptr(1, 0),
        movr(2, 10),
        alu64(AluOp::Add, 2, -4),
        call(id::MAP_LOOKUP_ELEM),
        jmp(Cond::Eq, 0, 0, 5),
        movr(6, 0),
        call(id::GET_SMP_PROCESSOR_ID),
        alu64(AluOp::Add, 0, 1),
        stx(Size::DW, 6, 0, 0),
        ja(0),
        mov(0, 0),
        exit(),
    ];
    let vm = Vm::new(
        &image(
            ProgType::Xdp,
            prog2,
            vec![map("pc", MapType::PercpuArray, 4, 8, 1)],
        ),
        VmConfig::kernel(),
    )
    .expect("loads");
    let f = udp_frame(60);
    for cpu in 0..4 {
        let res = vm.run(
            0,
            Context::Xdp(XdpMd::new(&f)),
            &RunOptions {
                cpu,
                ..Default::default()
            },
        );
        assert!(res.result.is_ok(), "{:?}", res.result);
    }
    let m = vm.map("pc").expect("map");
    let all = m.lookup(&0u32.to_le_bytes()).expect("ok").expect("value");
    assert_eq!(all.len(), 32);
    for cpu in 0..4u64 {
        let c = cpu as usize;
        assert_eq!(&all[c * 8..c * 8 + 8], &(cpu + 1).to_le_bytes());
    }
}

#[test]
fn tail_calls_stop_after_33() {
    use nfkit_vm::helpers::table::id;
    // Entry 0 increments a counter in r... (registers survive tail calls
    // except r1); count via a global array value and tail-call itself.
    let prog = vec![
        movr(6, 1),
        map_value(7, 1, 0),
        ldx(Size::DW, 0, 7, 0),
        alu64(AluOp::Add, 0, 1),
        stx(Size::DW, 7, 0, 0),
        movr(1, 6),
        map_ptr(2, 0),
        mov(3, 0),
        call(id::TAIL_CALL),
        ldx(Size::DW, 0, 7, 0),
        exit(),
    ];
    let mut g = map("count", MapType::Array, 4, 8, 1);
    g.kind = nfkit_object::MapKind::Global {
        section: ".bss".into(),
        read_only: false,
    };
    g.data = Some(vec![0; 8]);
    let vm = Vm::new(
        &image(
            ProgType::Xdp,
            prog,
            vec![map("jmp", MapType::ProgArray, 4, 4, 4), g],
        ),
        VmConfig::kernel(),
    )
    .expect("loads");
    vm.map("jmp")
        .expect("map")
        .update(&0u32.to_le_bytes(), &0u32.to_le_bytes(), 0)
        .expect("set");
    let f = udp_frame(60);
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(
        res.r0(),
        Some(34),
        "1 run + 33 tail calls: {:?}",
        res.result
    );
}

#[test]
fn prog_array_slots_from_the_object_are_filled_at_load() {
    use nfkit_vm::helpers::table::id;
    // Same program as above, but slot 0 of "jmp" comes from the Image's
    // map_inits (as `__array(values, ...)` gives it), not from Rust.
    let prog = vec![
        movr(6, 1),
        map_value(7, 1, 0),
        ldx(Size::DW, 0, 7, 0),
        alu64(AluOp::Add, 0, 1),
        stx(Size::DW, 7, 0, 0),
        movr(1, 6),
        map_ptr(2, 0),
        mov(3, 0),
        call(id::TAIL_CALL),
        ldx(Size::DW, 0, 7, 0),
        exit(),
    ];
    let mut g = map("count", MapType::Array, 4, 8, 1);
    g.kind = nfkit_object::MapKind::Global {
        section: ".bss".into(),
        read_only: false,
    };
    g.data = Some(vec![0; 8]);
    let mut img = image(
        ProgType::Xdp,
        prog,
        vec![map("jmp", MapType::ProgArray, 4, 4, 4), g],
    );
    img.map_inits.push(nfkit_object::MapInit {
        map: 0,
        slot: 0,
        entry: 0,
    });
    let vm = Vm::new(&img, VmConfig::kernel()).expect("loads");
    let f = udp_frame(60);
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(34), "{:?}", res.result);
    // A slot naming a missing entry is refused at load.
    img.map_inits[0].entry = 5;
    assert!(matches!(
        Vm::new(&img, VmConfig::kernel()),
        Err(nfkit_vm::LoadError::Map { index: 0, .. })
    ));
}

#[test]
fn bpf_loop_calls_back() {
    use nfkit_vm::helpers::table::id;
    // sum i for i in 0..10 into a stack slot via the callback.
    let prog = vec![
        st(Size::DW, 10, -8, 0),
        mov(1, 10),
        func_ptr(2, 9), // callback at slot 2+1+9 = 12
        movr(3, 10),
        alu64(AluOp::Add, 3, -8),
        mov(4, 0),
        call(id::LOOP),
        ldx(Size::DW, 1, 10, -8),
        alu64(AluOp::Mul, 1, 1000),
        alu64r(AluOp::Add, 0, 1),
        exit(),
        // callback(i, ctx): *ctx += i; return 0
        ldx(Size::DW, 3, 2, 0),
        alu64r(AluOp::Add, 3, 1),
        stx(Size::DW, 2, 3, 0),
        mov(0, 0),
        exit(),
    ];
    let vm = Vm::new(&image(ProgType::Xdp, prog, vec![]), VmConfig::kernel()).expect("loads");
    let f = udp_frame(60);
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(45 * 1000 + 10), "{:?}", res.result);
}

#[test]
fn pinned_clock_and_trace() {
    use nfkit_vm::helpers::table::id;
    let vm = Vm::new(
        &image(ProgType::Xdp, vec![call(id::KTIME_GET_NS), exit()], vec![]),
        VmConfig::kernel(),
    )
    .expect("loads");
    let f = udp_frame(60);
    let opts = RunOptions {
        clock: Some(Arc::new(FixedClock::new(12345))),
        trace: true,
        ..Default::default()
    };
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &opts);
    assert_eq!(res.r0(), Some(12345));
    assert_eq!(res.trace.len(), 2);
    assert_eq!(res.trace[0].changes.len(), 1);
    assert_eq!(res.trace[0].changes[0].new, 12345);
}

/// Tracing run options with the clock fixed at 77.
fn trace_opts() -> RunOptions {
    RunOptions {
        clock: Some(Arc::new(FixedClock::new(77))),
        trace: true,
        ..Default::default()
    }
}

/// An XDP program that reads the context and the packet, stores on the
/// stack, adds to a map atomically, calls a helper and a local function.
fn memory_helpers_and_functions() -> nfkit_object::Image {
    use nfkit_vm::helpers::table::id;
    let prog = vec![
        ldx(Size::W, 2, 1, 0),    // 0: r2 = data
        ldx(Size::W, 3, 1, 4),    // 1: r3 = data_end
        movr(4, 2),               // 2
        alu64(AluOp::Add, 4, 14), // 3
        jmpr(Cond::Gt, 4, 3, 8),  // 4: short -> 13
        ldx(Size::H, 5, 2, 12),   // 5: ethertype
        stx(Size::DW, 10, 5, -8), // 6: to the stack
        map_value(6, 0, 0),       // 7-8
        Insn::Atomic {
            size: Size::DW,
            op: AtomicOp::Add { fetch: false },
            dst: r(6),
            src: r(5),
            off: 0,
        }, // 9: counts[0] += r5
        call(id::KTIME_GET_NS),   // 10
        call_local(3),            // 11: -> 15
        exit(),                   // 12
        mov(0, 1),                // 13: XDP_DROP
        exit(),                   // 14
        mov(0, 2),                // 15: sub
        exit(),                   // 16
    ];
    image(
        ProgType::Xdp,
        prog,
        vec![map("counts", MapType::Array, 4, 8, 1)],
    )
}

/// The trace steps of that program: function entries, memory accesses
/// (context, packet, stack, map), the helper's return.
fn check_trace_steps(t: &[nfkit_vm::TraceStep]) {
    use nfkit_vm::{AccessKind, MemAccess, MemRegion};
    assert_eq!(t[0].enters.as_deref(), Some("prog"));
    assert!(t[1].enters.is_none());
    let ctx = t[1].mem.as_ref().expect("ctx load");
    assert_eq!(
        (ctx.kind, &ctx.region, ctx.offset, ctx.size),
        (AccessKind::Read, &MemRegion::Ctx, 4, 4)
    );
    assert_eq!(
        t[5].mem,
        Some(MemAccess {
            kind: AccessKind::Read,
            region: MemRegion::Packet,
            offset: 12,
            size: 2,
            value: 0x8,
            old: None,
        })
    );
    assert_eq!(
        t[6].mem,
        Some(MemAccess {
            kind: AccessKind::Write,
            region: MemRegion::Stack,
            offset: -8,
            size: 8,
            value: 0x8,
            old: Some(0),
        })
    );
    let atomic = t[8].mem.as_ref().expect("atomic");
    assert_eq!(atomic.region, MemRegion::Map("counts".into()));
    assert_eq!(
        (atomic.kind, atomic.offset, atomic.value, atomic.old),
        (AccessKind::Atomic, 0, 8, Some(0))
    );
    let h = t[9].helper.as_ref().expect("helper");
    assert_eq!((h.name, h.ret), (Some("ktime_get_ns"), Some(77)));
    assert_eq!(t[11].enters.as_deref(), Some("prog@15"));
    assert_eq!(t[13].enters.as_deref(), Some("prog"), "back in the caller");
}

/// The same steps as text, and the trace lines with function headers.
fn check_trace_text(res: &nfkit_vm::RunResult) {
    let t = &res.trace;
    assert_eq!(
        t[5].to_string(),
        format!(
            "{:>5}: {:<32} ; read packet+12 (2 bytes) = 0x8, r5 = 0x8 (was 0x0)",
            5, "r5 = *(u16 *)(r2 + 12)"
        )
    );
    assert!(
        t[6].to_string()
            .contains("write stack fp-8 (8 bytes) = 0x8 (was 0x0)"),
        "{}",
        t[6]
    );
    assert!(
        t[8].to_string()
            .contains("atomic map counts+0 (8 bytes) = 0x8 (was 0x0)"),
        "{}",
        t[8]
    );
    assert!(
        t[9].to_string()
            .contains("bpf_ktime_get_ns returned 0x4d, r0 = 0x4d (was 0x0)"),
        "{}",
        t[9]
    );
    let lines = res.trace_lines();
    assert_eq!(lines[0], "prog:");
    assert!(lines.iter().any(|l| l == "prog@15:"), "{lines:#?}");
    assert_eq!(lines.len(), t.len() + 3);
}

/// A faulting store: marked, no memory access claimed.
fn check_faulting_store_trace(f: &[u8], opts: &RunOptions) {
    let vm = Vm::new(
        &image(
            ProgType::Xdp,
            vec![
                ldx(Size::W, 2, 1, 0),
                st(Size::W, 2, 100, 1),
                mov(0, 2),
                exit(),
            ],
            vec![],
        ),
        VmConfig::kernel(),
    )
    .expect("loads");
    let res = vm.run(0, Context::Xdp(XdpMd::new(f)), opts);
    assert!(res.result.is_err());
    let last = res.trace.last().expect("steps");
    assert!(last.faulted && last.mem.is_none(), "{last:?}");
    assert!(last.to_string().ends_with("; faulted"), "{last}");
}

#[test]
fn trace_shows_memory_helpers_and_functions() {
    let vm = Vm::new(&memory_helpers_and_functions(), VmConfig::kernel()).expect("loads");
    let f = udp_frame(60);
    let opts = trace_opts();
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &opts);
    assert_eq!(res.r0(), Some(2), "{:?}", res.result);
    assert_eq!(res.trace.len() as u64, res.insns);
    check_trace_steps(&res.trace);
    check_trace_text(&res);
    check_faulting_store_trace(&f, &opts);
}

#[test]
fn socket_filter_sees_the_network_header_and_ld_abs() {
    // r0 = ld_abs_b[9] (IP protocol at network offset 9)
    let prog = vec![
        movr(6, 1),
        Insn::LdAbs {
            size: Size::B,
            imm: 9,
        },
        exit(),
    ];
    let vm = Vm::new(
        &image(ProgType::SocketFilter, prog, vec![]),
        VmConfig::kernel(),
    )
    .expect("loads");
    let f = udp_frame(60);
    let res = vm.run(0, Context::Skb(SkBuff::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(17));
    // Out of bounds ends the program with 0.
    let prog = vec![
        movr(6, 1),
        Insn::LdAbs {
            size: Size::W,
            imm: 1000,
        },
        mov(0, 5),
        exit(),
    ];
    let vm = Vm::new(
        &image(ProgType::SocketFilter, prog, vec![]),
        VmConfig::kernel(),
    )
    .expect("loads");
    assert_eq!(
        vm.run(0, Context::Skb(SkBuff::new(&f)), &RunOptions::default())
            .r0(),
        Some(0)
    );
    // __sk_buff.len is from the network header; mark is not writable.
    let prog = vec![ldx(Size::W, 0, 1, 0), exit()];
    let vm = Vm::new(
        &image(ProgType::SocketFilter, prog, vec![]),
        VmConfig::kernel(),
    )
    .expect("loads");
    assert_eq!(
        vm.run(0, Context::Skb(SkBuff::new(&f)), &RunOptions::default())
            .r0(),
        Some(46)
    );
    let prog = vec![st(Size::W, 1, 8, 1), mov(0, 0), exit()];
    let vm = Vm::new(
        &image(ProgType::SocketFilter, prog, vec![]),
        VmConfig::kernel(),
    )
    .expect("loads");
    assert!(vm
        .run(0, Context::Skb(SkBuff::new(&f)), &RunOptions::default())
        .result
        .is_err());
    // ...but it is for TC.
    let prog = vec![st(Size::W, 1, 8, 77), mov(0, 0), exit()];
    let vm = Vm::new(&image(ProgType::SchedCls, prog, vec![]), VmConfig::kernel()).expect("loads");
    let res = vm.run(0, Context::Skb(SkBuff::new(&f)), &RunOptions::default());
    assert_eq!(res.skb.expect("skb").mark, 77);
}

#[test]
fn helpers_not_allowed_for_the_program_type() {
    use nfkit_vm::helpers::table::id;
    let prog = vec![mov(2, 0), call(id::XDP_ADJUST_HEAD), exit()];
    let e =
        Vm::new(&image(ProgType::SchedCls, prog, vec![]), VmConfig::kernel()).expect_err("refused");
    assert_eq!(e.rule(), Some(Rule::HelperNotAllowed));
}

#[test]
fn ringbuf_output_and_reserve() {
    use nfkit_vm::helpers::table::id;
    let prog = vec![
        st(Size::DW, 10, -8, 0x0102_0304),
        map_ptr(1, 0),
        movr(2, 10),
        alu64(AluOp::Add, 2, -8),
        mov(3, 8),
        mov(4, 0),
        call(id::RINGBUF_OUTPUT),
        map_ptr(1, 0),
        mov(2, 4),
        mov(3, 0),
        call(id::RINGBUF_RESERVE),
        jmp(Cond::Eq, 0, 0, 4),
        st(Size::W, 0, 0, 0x0a0b0c0d),
        movr(1, 0),
        mov(2, 0),
        call(id::RINGBUF_SUBMIT),
        mov(0, 0),
        exit(),
    ];
    let vm = Vm::new(
        &image(
            ProgType::Xdp,
            prog,
            vec![map("rb", MapType::Ringbuf, 0, 0, 4096)],
        ),
        VmConfig::kernel(),
    )
    .expect("loads");
    let f = udp_frame(60);
    let res = vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert_eq!(res.r0(), Some(0), "{:?}", res.result);
    let recs = vm
        .map("rb")
        .expect("map")
        .ringbuf_consume()
        .expect("ringbuf");
    assert_eq!(
        recs,
        vec![vec![4, 3, 2, 1, 0, 0, 0, 0], vec![0x0d, 0x0c, 0x0b, 0x0a]]
    );
}

#[test]
fn void_subprograms_load_but_entries_and_callbacks_must_set_r0() {
    use nfkit_vm::helpers::table::id;
    // main: call sub; r0 = 7; exit.  sub: exit without touching r0 (a
    // `void` function, as clang emits them).
    let void_sub = vec![call_local(2), mov(0, 7), exit(), exit()];
    let vm = Vm::new(&image(ProgType::Xdp, void_sub, vec![]), VmConfig::kernel()).expect("loads");
    let f = udp_frame(60);
    assert_eq!(
        vm.run(0, Context::Xdp(XdpMd::new(&f)), &RunOptions::default())
            .r0(),
        Some(7)
    );
    // The entry's own exit still needs r0.
    assert_eq!(load_err(vec![exit()]), Rule::UninitRead);
    // A bpf_loop callback's r0 is read by the helper.
    let no_r0_callback = vec![
        mov(1, 4),
        func_ptr(2, 5),
        mov(3, 0),
        mov(4, 0),
        call(id::LOOP),
        exit(),
        exit(),
    ];
    // The lddw is at slot 1: target = 1 + 1 + 5 = slot 7, the last exit.
    assert_eq!(load_err(no_r0_callback), Rule::UninitRead);
}

#[test]
fn shared_maps_take_updates_from_every_cpu() {
    use nfkit_vm::helpers::table::id;
    // key 1 -> value 0x1122 via bpf_map_update_elem, in map 0 (hash) and
    // map 1 (array), from whichever CPU the run is on.
    let update = |m: i32| {
        vec![
            st(Size::W, 10, -4, 1),
            st(Size::DW, 10, -16, 0x1122),
            map_ptr(1, m),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            movr(3, 10),
            alu64(AluOp::Add, 3, -16),
            mov(4, 0),
            call(id::MAP_UPDATE_ELEM),
            exit(),
        ]
    };
    for m in 0..2 {
        for cpu in 0..4 {
            let vm = Vm::new(
                &image(
                    ProgType::Xdp,
                    update(m),
                    vec![
                        map("h", MapType::Hash, 4, 8, 4),
                        map("a", MapType::Array, 4, 8, 4),
                    ],
                ),
                VmConfig::kernel(),
            )
            .expect("loads");
            let f = udp_frame(60);
            let res = vm.run(
                0,
                Context::Xdp(XdpMd::new(&f)),
                &RunOptions {
                    cpu,
                    ..Default::default()
                },
            );
            assert_eq!(res.r0(), Some(0), "map {m} cpu {cpu}: {:?}", res.result);
            let name = if m == 0 { "h" } else { "a" };
            let v = vm
                .map(name)
                .expect("map")
                .lookup(&1u32.to_le_bytes())
                .expect("ok");
            assert_eq!(
                v,
                Some(0x1122u64.to_le_bytes().to_vec()),
                "map {name} cpu {cpu}"
            );
        }
    }
}

/// An unknown helper refuses only the entries that reach it: the others
/// load and run; running a refused one fails naming helper and program.
#[test]
fn unknown_helper_refuses_only_the_entries_reaching_it() {
    use nfkit_object::{Entry, Function, Image};
    let func = |name: &str, start: usize, len: usize| Function {
        name: name.into(),
        start,
        len,
        global: true,
        btf_id: None,
        origin: String::new(),
    };
    let entry = |name: &str, function: usize| Entry {
        name: name.into(),
        section: "xdp".into(),
        prog_type: ProgType::Xdp,
        function,
    };
    let img = Image {
        insns: vec![mov(0, 2), exit(), call(14), exit()],
        functions: vec![func("plain", 0, 2), func("fib", 2, 2)],
        entries: vec![entry("plain", 0), entry("fib", 1)],
        license: "GPL".into(),
        ..Image::default()
    };
    let vm = Vm::new(&img, VmConfig::kernel()).expect("plain loads");
    assert!(vm.entry_refused("plain").is_none());
    let why = vm.entry_refused("fib").expect("fib refused").to_string();
    assert!(
        why.contains("bpf_get_current_pid_tgid") && why.contains("program fib"),
        "{why}"
    );
    let pkt = [0u8; 64];
    let res = vm.run(
        "plain",
        Context::Xdp(XdpMd::new(&pkt)),
        &RunOptions::default(),
    );
    assert_eq!(res.r0(), Some(2));
    let res = vm.run(
        "fib",
        Context::Xdp(XdpMd::new(&pkt)),
        &RunOptions::default(),
    );
    let err = res.result.expect_err("fib must not run").to_string();
    assert!(err.contains("bpf_get_current_pid_tgid"), "{err}");
    // With only the refused entry, the load fails.
    let only = Image {
        entries: vec![entry("fib", 1)],
        ..img
    };
    let e = Vm::new(&only, VmConfig::kernel()).expect_err("refused");
    assert_eq!(e.rule(), Some(Rule::UnknownHelper));
}
