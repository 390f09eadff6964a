//! The JIT against the interpreter on what is particular to native code:
//! which engine runs, code pages never writable and executable at once,
//! the budget ending a run at the interpreter's instruction, faults and
//! frame limits reported alike, context fields after helpers move the
//! packet. (Whole-ISA equivalence is `jit_equiv.rs`; every other VM test
//! runs on the JIT, the default engine.)

mod common;

use common::*;
use nfkit_isa::{AluOp, Cond, Size};
use nfkit_object::{MapType, ProgType};
use nfkit_vm::{
    Context, Engine, EngineUse, RunErrorKind, RunOptions, RunResult, Vm, VmConfig, XdpMd,
};

fn jit_vm(t: ProgType, insns: Vec<nfkit_isa::Insn>) -> Vm {
    let vm = Vm::new(
        &image(t, insns, vec![map("m", MapType::Array, 4, 8, 4)]),
        VmConfig::kernel().with_engine(Engine::Jit),
    )
    .expect("loads");
    assert_eq!(vm.engine(0usize), Some(&EngineUse::Jit));
    vm
}

/// Runs `vm` on `frame` with both engines and `opts`.
fn both(vm: &Vm, frame: &[u8], opts: &RunOptions) -> (RunResult, RunResult) {
    let jit = vm.run(0usize, Context::Xdp(XdpMd::new(frame)), opts);
    let interp_opts = RunOptions {
        interp: true,
        ..opts.clone()
    };
    let interp = vm.run(0usize, Context::Xdp(XdpMd::new(frame)), &interp_opts);
    assert_eq!(jit.engine, Engine::Jit);
    assert_eq!(interp.engine, Engine::Interp);
    (jit, interp)
}

fn same(jit: &RunResult, interp: &RunResult) {
    assert_eq!(
        format!("{:?}", jit.result),
        format!("{:?}", interp.result),
        "result"
    );
    assert_eq!(jit.packet, interp.packet, "packet");
    assert_eq!(jit.insns, interp.insns, "instruction count");
}

#[test]
fn the_engine_that_ran_is_reported() {
    let vm = jit_vm(ProgType::Xdp, vec![mov(0, 2), exit()]);
    let f = udp_frame(60);
    let (jit, interp) = both(&vm, &f, &RunOptions::default());
    same(&jit, &interp);
    let traced = vm.run(
        0usize,
        Context::Xdp(XdpMd::new(&f)),
        &RunOptions {
            trace: true,
            ..RunOptions::default()
        },
    );
    assert_eq!(traced.engine, Engine::Interp, "traced runs interpret");
    assert!(!traced.trace.is_empty());
    let interp_vm = Vm::new(
        &image(ProgType::Xdp, vec![mov(0, 2), exit()], vec![]),
        VmConfig::kernel().with_engine(Engine::Interp),
    )
    .expect("loads");
    assert_eq!(interp_vm.engine(0usize), Some(&EngineUse::Interp));
}

/// Every mapping of the process: none may be writable and executable.
fn wx_mappings() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter(|l| {
            let perms = l.split_whitespace().nth(1).unwrap_or("");
            perms.contains('w') && perms.contains('x')
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn code_is_never_writable_and_executable() {
    let before = wx_mappings();
    let vms: Vec<Vm> = (0..20)
        .map(|i| {
            jit_vm(
                ProgType::Xdp,
                vec![mov(0, i), alu64(AluOp::Add, 0, 1), exit()],
            )
        })
        .collect();
    let f = udp_frame(60);
    for (i, vm) in vms.iter().enumerate() {
        let res = vm.run(0usize, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
        assert_eq!(res.r0(), Some(i as u64 + 1));
    }
    assert_eq!(wx_mappings(), before, "a W+X mapping appeared");
}

/// A loop writing the packet on every round: the budget ends it inside a
/// block, where the interpreter stops, with its side effects.
#[test]
fn the_budget_stops_at_the_interpreters_instruction() {
    let prog = vec![
        ldx(Size::W, 2, 1, 0), // data
        ldx(Size::W, 3, 1, 4), // data_end
        movr(4, 2),
        alu64(AluOp::Add, 4, 8),
        jmpr(Cond::Gt, 4, 3, 7), // short packet: exit
        mov(5, 0),
        // loop: *(u8 *)(data + (r5 & 7)) += 1; r5 += 1
        movr(6, 5),
        alu64(AluOp::And, 6, 7),
        alu64r(AluOp::Add, 6, 2),
        st(Size::B, 6, 0, 0x41),
        alu64(AluOp::Add, 5, 1),
        ja(-6),
        mov(0, 2),
        exit(),
    ];
    let vm = jit_vm(ProgType::Xdp, prog);
    let f = udp_frame(60);
    for budget in [1u64, 5, 6, 7, 9, 10, 11, 100, 1001, 12345] {
        let opts = RunOptions {
            budget: Some(budget),
            ..RunOptions::default()
        };
        let (jit, interp) = both(&vm, &f, &opts);
        same(&jit, &interp);
        let err = jit.result.as_ref().expect_err("the loop never ends");
        assert!(
            matches!(err.kind, RunErrorKind::Budget { limit } if limit == budget),
            "{err}"
        );
    }
}

#[test]
fn faults_name_the_same_instruction_and_region() {
    let progs = [
        // read past the packet's end, unchecked
        vec![ldx(Size::W, 2, 1, 0), ldx(Size::DW, 0, 2, 4000), exit()],
        // write to the context's data field
        vec![st(Size::W, 1, 0, 7), mov(0, 2), exit()],
        // a scalar used as a pointer
        vec![mov(2, 4096), ldx(Size::B, 0, 2, 0), exit()],
        // a map value read one past its end
        vec![map_value(2, 0, 0), ldx(Size::DW, 0, 2, 8), exit()],
    ];
    let f = udp_frame(60);
    for (i, p) in progs.into_iter().enumerate() {
        let vm = Vm::new(
            &image(ProgType::Xdp, p, vec![map("m", MapType::Array, 4, 8, 4)]),
            VmConfig::default().with_engine(Engine::Jit),
        )
        .expect("loads");
        let (jit, interp) = both(&vm, &f, &RunOptions::default());
        assert!(
            jit.result.is_err(),
            "program {i} must fault: {:?}",
            jit.result
        );
        same(&jit, &interp);
        assert_eq!(
            jit.result.as_ref().err().map(ToString::to_string),
            interp.result.as_ref().err().map(ToString::to_string),
            "program {i}"
        );
    }
}

#[test]
fn call_depth_faults_alike() {
    // f calls itself forever (not kernel-compatible: the default profile
    // lets recursion load and stops it at the frame limit).
    let prog = vec![call_local(1), exit(), call_local(-1), exit()];
    let vm = Vm::new(
        &image(ProgType::Xdp, prog, vec![]),
        VmConfig::default().with_engine(Engine::Jit),
    )
    .expect("loads");
    assert_eq!(vm.engine(0usize), Some(&EngineUse::Jit));
    let f = udp_frame(60);
    let (jit, interp) = both(&vm, &f, &RunOptions::default());
    same(&jit, &interp);
    let err = jit.result.expect_err("too deep");
    assert!(matches!(err.kind, RunErrorKind::CallDepth { .. }), "{err}");
}

#[test]
fn context_fields_follow_the_packet_after_a_helper_moves_it() {
    use nfkit_vm::helpers::table::id;
    // data before and after bpf_xdp_adjust_head(ctx, 14): r0 = difference.
    let prog = vec![
        movr(6, 1),
        ldx(Size::W, 7, 6, 0),
        movr(1, 6),
        mov(2, 14),
        call(id::XDP_ADJUST_HEAD),
        ldx(Size::W, 8, 6, 0),
        movr(0, 8),
        alu64r(AluOp::Sub, 0, 7),
        exit(),
    ];
    let vm = jit_vm(ProgType::Xdp, prog);
    let f = udp_frame(60);
    let (jit, interp) = both(&vm, &f, &RunOptions::default());
    same(&jit, &interp);
    assert_eq!(jit.r0(), Some(14));
    assert_eq!(jit.head_delta, 14);
}

fn kernel_vm(text: &str) -> Vm {
    let insns = nfkit_isa::asm::assemble(text, None).expect("assembles");
    Vm::new(
        &image(ProgType::Xdp, insns, vec![]),
        VmConfig::kernel().with_engine(Engine::Jit),
    )
    .expect("loads")
}

/// The checker proves packet accesses after `data_end` comparisons, for
/// constant offsets from `data` and for pointers moved by a variable
/// (through the register a comparison was made on), and native code
/// then gives the interpreter's results on every packet length.
#[test]
fn packet_accesses_after_data_end_checks_are_proven() {
    let parse = "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r0 = 2
        r4 = r2
        r4 += 34
        if r4 > r3 goto out
        r5 = *(u8 *)(r2 + 14)
        r5 &= 15
        r5 <<= 2
        r4 = r2
        r4 += 14
        r4 += r5
        r6 = r4
        r6 += 4
        if r6 > r3 goto out
        r0 = *(u16 *)(r4 + 2)
    out:
        exit";
    let sum = "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r0 = 0
    quad:
        r4 = r2
        r4 += 4
        if r4 > r3 goto done
        r5 = *(u16 *)(r2 + 0)
        r0 += r5
        *(u16 *)(r2 + 2) = r5
        r2 = r4
        goto quad
    done:
        exit";
    // Proven ops: the two loads of `parse`; the load and the store of `sum`.
    for (text, want) in [(parse, 2), (sum, 2)] {
        let vm = kernel_vm(text);
        assert_eq!(vm.proven_packet_accesses().len(), want, "{text}");
        for len in [0usize, 1, 14, 33, 34, 35, 37, 38, 60, 61, 62, 63, 64, 200] {
            let mut f = udp_frame(len.max(1));
            f.truncate(len);
            let (jit, interp) = both(&vm, &f, &RunOptions::default());
            same(&jit, &interp);
        }
    }
}

/// Unchecked accesses are never proven: no comparison, a comparison
/// that shows too little, a pointer the program moved after comparing, a
/// helper that may move the packet in between.
#[test]
fn unchecked_packet_accesses_are_not_proven() {
    let progs = [
        "r2 = *(u32 *)(r1 + 0)\n r0 = *(u8 *)(r2 + 0)\n exit",
        "r2 = *(u32 *)(r1 + 0)\n r3 = *(u32 *)(r1 + 4)\n r0 = 0\n r4 = r2\n r4 += 4\n if r4 > r3 goto out\n r0 = *(u32 *)(r2 + 2)\n out:\n exit",
        "r2 = *(u32 *)(r1 + 0)\n r3 = *(u32 *)(r1 + 4)\n r0 = 0\n r4 = r2\n r4 += 4\n if r4 > r3 goto out\n r2 += r0\n r2 += 8\n r0 = *(u8 *)(r2 + 0)\n out:\n exit",
        "r6 = r1\n r2 = *(u32 *)(r1 + 0)\n r3 = *(u32 *)(r1 + 4)\n r0 = 0\n r4 = r2\n r4 += 4\n if r4 > r3 goto out\n r7 = r2\n r1 = r6\n r2 = 4\n call 44\n r0 = *(u8 *)(r7 + 0)\n out:\n exit",
    ];
    for text in progs {
        let vm = kernel_vm(text);
        assert!(vm.proven_packet_accesses().is_empty(), "{text}");
    }
}

/// xorshift64*: reproducible random programs without a framework.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

/// A random program around packet pointers: copies, constant and
/// variable moves, comparisons with `data_end` in every form, loads and
/// stores near them, head adjustments, loops.
fn packet_program(rng: &mut Rng) -> Vec<nfkit_isa::Insn> {
    use nfkit_vm::helpers::table::id;
    let ptrs = [2u8, 4, 5, 7];
    let sizes = [Size::B, Size::H, Size::W, Size::DW];
    let mut p = vec![
        movr(6, 1),
        ldx(Size::W, 2, 6, 0),
        ldx(Size::W, 3, 6, 4),
        mov(0, 0),
        movr(4, 2),
        movr(5, 2),
        movr(7, 2),
    ];
    // (index of a jump, op index it goes to)
    let mut jumps = Vec::new();
    let mut op_starts = Vec::new();
    let n = 4 + rng.below(22) as usize;
    for _ in 0..n {
        op_starts.push(p.len());
        let (a, b) = (rng.pick(&ptrs), rng.pick(&ptrs));
        match rng.below(20) {
            16..=19 => {
                // A guard: `a + k <= data_end`, else to the end.
                jumps.push((p.len() + 2, n));
                p.extend([
                    movr(9, a),
                    alu64(AluOp::Add, 9, 1 + rng.below(40) as i32),
                    jmpr(Cond::Gt, 9, 3, 0),
                ]);
            }
            0 | 1 => p.push(movr(a, b)),
            2..=4 => p.push(alu64(AluOp::Add, a, rng.below(64) as i32 - 16)),
            5 => p.extend([
                movr(8, 0),
                alu64(AluOp::And, 8, 31),
                alu64r(AluOp::Add, a, 8),
            ]),
            6..=8 => {
                let conds = [Cond::Gt, Cond::Ge, Cond::Lt, Cond::Le];
                let c = rng.pick(&conds);
                jumps.push((p.len(), rng.below(n as u64 + 1) as usize));
                if rng.below(2) == 0 {
                    p.push(jmpr(c, a, 3, 0));
                } else {
                    p.push(jmpr(c, 3, a, 0));
                }
            }
            9..=11 => {
                let off = rng.below(48) as i16 - 8;
                p.extend([ldx(rng.pick(&sizes), 9, a, off), alu64r(AluOp::Add, 0, 9)]);
            }
            12 | 13 => p.push(stx(rng.pick(&sizes), a, 0, rng.below(48) as i16 - 8)),
            14 => p.extend([
                movr(1, 6),
                mov(2, rng.below(24) as i32 - 8),
                call(id::XDP_ADJUST_HEAD),
                ldx(Size::W, 2, 6, 0),
                ldx(Size::W, 3, 6, 4),
                movr(4, 2),
                movr(5, 2),
                movr(7, 2),
            ]),
            _ => {
                // A loop back to an earlier op, while a pointer is below
                // data_end.
                jumps.push((p.len(), rng.below(op_starts.len() as u64) as usize));
                p.push(jmpr(Cond::Lt, a, 3, 0));
            }
        }
    }
    op_starts.push(p.len());
    p.push(exit());
    for (at, target) in jumps {
        let t = op_starts[target.min(op_starts.len() - 1)] as i64;
        if let nfkit_isa::Insn::Jmp { off, .. } = &mut p[at] {
            *off = (t - at as i64 - 1) as i16;
        }
    }
    p
}

/// Whatever packet-pointer program and packet, the JIT's unchecked
/// (proven) accesses give the interpreter's results: an unsound proof
/// would show as a difference, or as a crash of this process.
#[test]
fn packet_proofs_hold_on_random_programs() {
    // NFKIT_PROOF_SEED and NFKIT_PROOF_PROGRAMS explore further.
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("NFKIT_PROOF_SEED").unwrap_or(0x5eed_1234_abcd_0001);
    let count = env("NFKIT_PROOF_PROGRAMS").unwrap_or(6000);
    let mut rng = Rng(seed | 1);
    let (mut programs, mut proven) = (0, 0usize);
    let lens = [0usize, 1, 7, 14, 20, 33, 40, 64, 100];
    let opts = RunOptions {
        budget: Some(3000),
        ..RunOptions::default()
    };
    for _ in 0..count {
        let prog = packet_program(&mut rng);
        let Ok(vm) = Vm::new(
            &image(ProgType::Xdp, prog.clone(), vec![]),
            VmConfig::kernel().with_engine(Engine::Jit),
        ) else {
            continue;
        };
        programs += 1;
        proven += vm.proven_packet_accesses().len();
        for &len in &lens {
            let frame: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let (jit, interp) = both(&vm, &frame, &opts);
            if format!("{:?}", jit.result) != format!("{:?}", interp.result)
                || jit.packet != interp.packet
                || jit.insns != interp.insns
            {
                panic!(
                    "seed {seed}, packet length {len}: jit {:?} / interp {:?}\n{}",
                    jit.result,
                    interp.result,
                    nfkit_isa::disasm::disassemble(&prog, &Default::default())
                );
            }
        }
    }
    println!("{programs} programs loaded, {proven} packet accesses proven");
    assert!(programs as u64 > count * 2 / 3, "{programs}");
    assert!(
        proven as u64 > count / 3,
        "the generator must exercise proofs: {proven}"
    );
}

/// Stack accesses through r10 (native code addresses them from the
/// frame's base and r10 without a check) reach each call depth's own
/// frame, its top and its bottom: callees do not see or overwrite their
/// callers' slots, on both engines.
#[test]
fn frames_at_every_depth_are_their_own() {
    let prog = vec![
        st(Size::DW, 10, -8, 1),      // 0: main's top slot
        st(Size::DW, 10, -512, 1000), // 1: main's bottom slot
        call_local(5),                // 2: -> f1 (8)
        ldx(Size::DW, 1, 10, -8),     // 3
        alu64r(AluOp::Add, 0, 1),     // 4
        ldx(Size::DW, 1, 10, -512),   // 5
        alu64r(AluOp::Add, 0, 1),     // 6
        exit(),                       // 7: 1 + 1000 + f1
        st(Size::DW, 10, -8, 10),     // 8: f1
        call_local(3),                // 9: -> f2 (13)
        ldx(Size::DW, 1, 10, -8),     // 10
        alu64r(AluOp::Add, 0, 1),     // 11
        exit(),                       // 12: 10 + f2
        st(Size::DW, 10, -512, 100),  // 13: f2, its bottom slot
        ldx(Size::DW, 0, 10, -512),   // 14
        exit(),                       // 15: 100
    ];
    let vm = Vm::new(
        &image(ProgType::Xdp, prog, vec![]),
        VmConfig::default().with_engine(Engine::Jit),
    )
    .expect("loads");
    assert_eq!(vm.engine(0usize), Some(&EngineUse::Jit));
    let f = udp_frame(60);
    for _ in 0..3 {
        let (jit, interp) = both(&vm, &f, &RunOptions::default());
        same(&jit, &interp);
        assert_eq!(jit.result.as_ref().ok(), Some(&1111));
    }
}
