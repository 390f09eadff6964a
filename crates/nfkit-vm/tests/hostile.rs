//! Hostile programs: many random and mutated programs, run on random
//! memory and packets. None may crash the process (a host memory access
//! outside VM memory would hit a guard page: SIGSEGV, a test failure),
//! run past its budget, or report a result without having stayed inside
//! its regions. The count is fixed so the run time stays bounded.

mod common;

use common::*;
use nfkit_isa::{Insn, RawInsn};
use nfkit_object::{Image, MapType, ProgType};
use nfkit_vm::{Context, RunErrorKind, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Programs generated in total (random + mutated); about 40% of them
/// pass the load-time checks and run.
const PROGRAMS: u32 = 200_000;
const BUDGET: u64 = 4_000;

/// Seed programs to mutate: small loops, map access, packet parsing.
fn seeds() -> Vec<Vec<Insn>> {
    use nfkit_isa::{AluOp, Cond, Size};
    use nfkit_vm::helpers::table::id;
    vec![
        vec![
            ldx(Size::W, 2, 1, 0),
            ldx(Size::W, 3, 1, 4),
            movr(4, 2),
            alu64(AluOp::Add, 4, 14),
            jmpr(Cond::Gt, 4, 3, 3),
            ldx(Size::H, 0, 2, 12),
            alu64(AluOp::And, 0, 3),
            exit(),
            mov(0, 2),
            exit(),
        ],
        vec![
            st(Size::W, 10, -4, 1),
            map_ptr(1, 0),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            call(id::MAP_LOOKUP_ELEM),
            jmp(Cond::Eq, 0, 0, 2),
            ldx(Size::DW, 1, 0, 0),
            stx(Size::DW, 0, 1, 8),
            mov(0, 2),
            exit(),
        ],
        vec![
            mov(0, 0),
            mov(1, 10),
            alu64(AluOp::Add, 0, 3),
            alu64(AluOp::Sub, 1, 1),
            jmp(Cond::Ne, 1, 0, -3),
            exit(),
        ],
        vec![
            movr(6, 1),
            mov(2, -20),
            call(id::XDP_ADJUST_HEAD),
            ldx(Size::W, 2, 6, 0),
            ldx(Size::B, 0, 2, 0),
            exit(),
        ],
    ]
}

fn raw(insns: &[Insn]) -> Vec<RawInsn> {
    nfkit_isa::encode_program(insns)
}

fn maps() -> Vec<nfkit_object::MapSpec> {
    vec![
        map("h", MapType::Hash, 4, 16, 8),
        map("a", MapType::Array, 4, 16, 4),
        map("pa", MapType::PercpuArray, 4, 8, 2),
        map("lpm", MapType::LpmTrie, 8, 8, 4),
        map("rb", MapType::Ringbuf, 0, 0, 4096),
        map("jmp", MapType::ProgArray, 4, 4, 2),
    ]
}

/// Runs one program; panics (fails the test) only on a VM bug.
fn run_one(slots: &[RawInsn], data: &[u8], kind: u8, stats: &mut [u64; 3]) {
    let Ok(insns) = nfkit_isa::decode_program(slots) else {
        stats[0] += 1;
        return;
    };
    let t = match kind % 3 {
        0 => ProgType::Xdp,
        1 => ProgType::SchedCls,
        _ => ProgType::SocketFilter,
    };
    let mut img = Image::from_insns("p", t, insns);
    img.maps = maps();
    // The kernel profile's load-time analyses (bounds included) end on
    // every program, with a verdict and no panic.
    let _ = Vm::new(
        &img,
        VmConfig {
            budget: BUDGET,
            ..VmConfig::kernel()
        },
    );
    let config = VmConfig {
        budget: BUDGET,
        ..VmConfig::default()
    };
    let vm = match Vm::new(&img, config) {
        Ok(vm) => vm,
        Err(e) => {
            stats[1] += 1;
            if std::env::var("HOSTILE_DEBUG").is_ok() {
                eprintln!("REJ {:?}", e.rule());
            }
            return;
        }
    };
    if let Some(m) = vm.map("jmp") {
        let _ = m.update(&0u32.to_le_bytes(), &0u32.to_le_bytes(), 0);
    }
    stats[2] += 1;
    let ctx = match t {
        ProgType::Xdp => Context::Xdp(XdpMd::new(data)),
        _ => Context::Skb(SkBuff::new(data)),
    };
    let res = vm.run(
        0,
        ctx,
        &RunOptions {
            cpu: (kind as u32) % 4,
            ..Default::default()
        },
    );
    assert!(
        res.insns <= BUDGET + 1,
        "ran past the budget: {}",
        res.insns
    );
    if let Err(e) = &res.result {
        if let RunErrorKind::Budget { limit } = e.kind {
            assert_eq!(limit, BUDGET);
        }
    }
    // The raw form too (memory = the packet bytes).
    let vm2 = Vm::new(
        &img,
        VmConfig {
            budget: BUDGET,
            ..VmConfig::conformance()
        },
    );
    if let Ok(vm2) = vm2 {
        let res = vm2.run(0, Context::Raw(data), &RunOptions::default());
        assert!(res.insns <= BUDGET + 1);
        assert_eq!(res.packet.len(), data.len(), "raw memory keeps its size");
    }
}

/// Registers given values at the start of the entry function, so that more
/// programs pass the uninitialised-register check.
fn entry_prologue() -> Vec<Insn> {
    vec![
        mov(0, 0),
        movr(2, 10),
        alu64(nfkit_isa::AluOp::Add, 2, -16),
        movr(3, 1),
        mov(4, 14),
        mov(5, -1),
        movr(6, 1),
        mov(7, 0),
        mov(8, 4),
        mov(9, 512),
    ]
}

/// The same for a called function (r1-r5 are its arguments).
fn callee_prologue() -> Vec<Insn> {
    vec![
        mov(0, 0),
        movr(6, 1),
        movr(7, 10),
        alu64(nfkit_isa::AluOp::Add, 7, -8),
        mov(8, 2),
        mov(9, -7),
    ]
}

/// `body` with argument registers given values again after every call
/// (calls clobber r1-r5), ended by `exit`.
fn function(prologue: Vec<Insn>, body: Vec<Insn>) -> Vec<Insn> {
    let mut all = prologue;
    for i in body {
        all.push(i);
        if matches!(
            i,
            Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. }
        ) {
            all.extend([
                movr(1, 6),
                movr(2, 10),
                alu64(nfkit_isa::AluOp::Add, 2, -32),
                mov(3, 8),
                mov(4, 0),
                mov(5, 0),
            ]);
        }
    }
    all.push(Insn::Exit);
    all
}

/// A program of an entry function and up to three subprograms, all made
/// of random instructions whose control flow is bent to stay valid: jump
/// offsets are wrapped into their function (backward ones too, so loops
/// that only the budget ends are common), local calls and function
/// addresses name a subprogram's start. Register values, memory
/// addresses, helper arguments and everything else stay random.
fn structured_program() -> impl Strategy<Value = Vec<RawInsn>> {
    (
        prop::collection::vec(insn_strategy(), 1..24),
        prop::collection::vec(prop::collection::vec(insn_strategy(), 1..10), 0..4),
    )
        .prop_map(|(main, subs)| {
            let mut funcs = vec![function(entry_prologue(), main)];
            funcs.extend(subs.into_iter().map(|b| function(callee_prologue(), b)));
            let mut insns: Vec<Insn> = Vec::new();
            let mut bounds = Vec::new();
            for f in funcs {
                let a = insns.len();
                insns.extend(f);
                bounds.push((a, insns.len()));
            }
            let starts = nfkit_isa::slot_offsets(&insns);
            let rel = |from: usize, to: usize| starts[to] as i64 - starts[from] as i64 - 1;
            let subs = &bounds[1..];
            for (a, b) in bounds.iter().copied() {
                for (k, insn) in insns.iter_mut().enumerate().take(b).skip(a) {
                    let n = (b - a) as i64;
                    let wrap =
                        |off: i64| a + (k as i64 - a as i64 + 1 + off).rem_euclid(n) as usize;
                    match insn {
                        Insn::Ja { off } | Insn::Jmp { off, .. } | Insn::MayGoto { off } => {
                            *off = rel(k, wrap(*off as i64)) as i16;
                        }
                        Insn::Call {
                            kind: nfkit_isa::CallKind::Local,
                            imm,
                        }
                        | Insn::Lddw {
                            kind: nfkit_isa::LddwKind::Func,
                            imm,
                            ..
                        } => {
                            if let Some(&(s, _)) =
                                subs.get((*imm).unsigned_abs() as usize % subs.len().max(1))
                            {
                                *imm = rel(k, s) as i32;
                            }
                        }
                        _ => {}
                    }
                }
            }
            raw(&insns)
        })
}

fn slot_strategy() -> impl Strategy<Value = RawInsn> {
    // Opcodes from the defined set most of the time, registers mostly
    // valid, offsets and immediates small or extreme.
    let code = prop_oneof![any::<u8>(), prop::sample::select(OPCODES.to_vec())];
    let reg = prop_oneof![0u8..=10, 0u8..=15];
    let off = prop_oneof![-8i16..8, -520i16..64, any::<i16>()];
    let imm = prop_oneof![
        -16i32..16,
        any::<i32>(),
        prop::sample::select(vec![0, 1, -1, 8, 16, 32, 64, i32::MIN, i32::MAX])
    ];
    (code, reg.clone(), reg, off, imm).prop_map(|(code, dst, src, off, imm)| RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    })
}

/// A random slot that decodes on its own (an `lddw` gets its second
/// slot); anything else becomes `exit`.
fn decoding_slots(slots: Vec<RawInsn>) -> Vec<RawInsn> {
    let mut out = Vec::new();
    for s in slots {
        let pair = [
            s,
            RawInsn {
                imm: s.imm.rotate_left(7),
                ..RawInsn::default()
            },
        ];
        match nfkit_isa::decode_one(&pair) {
            Ok(Insn::Lddw { .. }) => out.extend(pair),
            Ok(_) => out.push(s),
            Err(_) => out.push(RawInsn {
                code: 0x95,
                ..RawInsn::default()
            }),
        }
    }
    out
}

/// A structurally valid instruction with random fields.
fn insn_strategy() -> impl Strategy<Value = Insn> {
    use nfkit_isa::*;
    use nfkit_vm::helpers::table::KERNEL_HELPERS;
    let reg = (0u8..=10).prop_map(|n| Reg::new(n).unwrap_or(Reg::R0));
    // Destinations: r10 is read-only (the loader rejects writes to it).
    let dreg = (0u8..=9).prop_map(|n| Reg::new(n).unwrap_or(Reg::R0));
    let width = prop_oneof![Just(Width::W64), Just(Width::W32)];
    let size = prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W), Just(Size::DW)];
    let alu_op = prop::sample::select(vec![
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::SDiv,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Neg,
        AluOp::Mod,
        AluOp::SMod,
        AluOp::Xor,
        AluOp::Mov,
        AluOp::MovSx(8),
        AluOp::MovSx(16),
        AluOp::Arsh,
    ]);
    let cond = prop::sample::select(vec![
        Cond::Eq,
        Cond::Gt,
        Cond::Ge,
        Cond::Set,
        Cond::Ne,
        Cond::Sgt,
        Cond::Sge,
        Cond::Lt,
        Cond::Le,
        Cond::Slt,
        Cond::Sle,
    ]);
    let imm = prop_oneof![-16i32..16, any::<i32>()];
    let off = prop_oneof![-16i16..16, -520i16..0, any::<i16>()];
    let operand = prop_oneof![
        reg.clone().prop_map(Operand::Reg),
        imm.clone().prop_map(Operand::Imm)
    ];
    // Mostly helpers the kernel profile has, sometimes any number.
    let helper = prop_oneof![
        9 => prop::sample::select(KERNEL_HELPERS.iter().map(|h| h.id).collect::<Vec<_>>()),
        1 => 0i32..220
    ];
    let atomic = prop::sample::select(vec![
        AtomicOp::Add { fetch: false },
        AtomicOp::Add { fetch: true },
        AtomicOp::Or { fetch: true },
        AtomicOp::And { fetch: false },
        AtomicOp::Xor { fetch: true },
        AtomicOp::Xchg,
        AtomicOp::CmpXchg,
    ]);
    prop_oneof![
        6 => (width.clone(), alu_op, dreg.clone(), operand.clone()).prop_map(|(width, op, dst, src)| {
            let src = match op {
                AluOp::Neg => Operand::Imm(0),
                AluOp::MovSx(_) => match src { Operand::Imm(_) => Operand::Reg(dst), r => r },
                _ => src,
            };
            Insn::Alu { width, op, dst, src }
        }),
        1 => (dreg.clone(), prop::sample::select(vec![16u8, 32, 64]), any::<bool>())
            .prop_map(|(dst, bits, be)| Insn::Endian {
                order: if be { ByteOrder::Be } else { ByteOrder::Le }, bits, dst }),
        3 => (size.clone(), any::<bool>(), dreg.clone(), reg.clone(), off.clone())
            .prop_map(|(size, sx, dst, src, off)| Insn::Ldx { size, signed: sx && size != Size::DW, dst, src, off }),
        2 => (size.clone(), reg.clone(), reg.clone(), off.clone())
            .prop_map(|(size, dst, src, off)| Insn::Stx { size, dst, src, off }),
        1 => (size.clone(), reg.clone(), off.clone(), imm.clone())
            .prop_map(|(size, dst, off, imm)| Insn::St { size, dst, off, imm }),
        1 => (any::<bool>(), atomic, reg.clone(), reg.clone(), off.clone())
            .prop_map(|(w, op, dst, src, off)| Insn::Atomic { size: if w { Size::W } else { Size::DW }, op, dst, src, off }),
        1 => (dreg.clone(), any::<u64>()).prop_map(|(d, v)| Insn::lddw(d, v)),
        // Map handles (one index past the maps), and direct value
        // addresses: mostly into the array map "a" (16-byte values), some
        // anywhere.
        1 => (dreg.clone(), prop_oneof![Just(1i32), 0i32..7], prop_oneof![-4i32..16, -4i32..20]).prop_map(|(dst, m, o)| {
            if o < 0 {
                Insn::Lddw { kind: LddwKind::MapIdx, dst, imm: m, next_imm: 0 }
            } else {
                Insn::Lddw { kind: LddwKind::MapIdxValue, dst, imm: m, next_imm: o }
            }
        }),
        1 => (dreg.clone(), -12i32..12).prop_map(|(dst, imm)| Insn::Lddw { kind: LddwKind::Func, dst, imm, next_imm: 0 }),
        1 => (prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W)], reg.clone(), imm.clone(), any::<bool>())
            .prop_map(|(size, src, imm, ind)| if ind { Insn::LdInd { size, src, imm } } else { Insn::LdAbs { size, imm } }),
        4 => (width, cond, reg.clone(), operand, -3i16..12)
            .prop_map(|(width, cond, dst, src, off)| Insn::Jmp { width, cond, dst, src, off }),
        1 => (-3i16..12).prop_map(|off| Insn::Ja { off }),
        1 => (-12i16..12).prop_map(|off| Insn::MayGoto { off }),
        2 => helper.prop_map(|imm| Insn::Call { kind: CallKind::Helper, imm }),
        1 => (0i32..12).prop_map(|imm| Insn::Call { kind: CallKind::Local, imm }),
        1 => reg.prop_map(|reg| Insn::Callx { reg }),
        2 => Just(Insn::Exit),
    ]
}

/// Opcodes the ISA defines.
const OPCODES: &[u8] = &[
    0x07, 0x0f, 0x17, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x47, 0x4f, 0x57, 0x5f, 0x67, 0x6f, 0x77, 0x7f,
    0x87, 0x97, 0x9f, 0xa7, 0xaf, 0xb7, 0xbf, 0xc7, 0xcf, 0xd4, 0xdc, 0xd7, 0x04, 0x0c, 0x14, 0x1c,
    0x24, 0x2c, 0x34, 0x3c, 0x44, 0x4c, 0x54, 0x5c, 0x64, 0x6c, 0x74, 0x7c, 0x84, 0x94, 0x9c, 0xa4,
    0xac, 0xb4, 0xbc, 0xc4, 0xcc, 0x18, 0x61, 0x69, 0x71, 0x79, 0x81, 0x89, 0x91, 0x62, 0x6a, 0x72,
    0x7a, 0x63, 0x6b, 0x73, 0x7b, 0xc3, 0xdb, 0x05, 0x06, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x45,
    0x4d, 0x55, 0x5d, 0x65, 0x6d, 0x75, 0x7d, 0xa5, 0xad, 0xb5, 0xbd, 0xc5, 0xcd, 0xd5, 0xdd, 0x16,
    0x1e, 0x26, 0x2e, 0x36, 0x56, 0x5e, 0xa6, 0xae, 0xc6, 0x85, 0x8d, 0x95, 0x20, 0x28, 0x30, 0x40,
    0x48, 0x50, 0xe5,
];

fn packet_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..80),
        (14usize..200).prop_map(udp_frame),
    ]
}

#[test]
fn random_programs_never_escape() {
    let mut runner = TestRunner::new(Config {
        cases: PROGRAMS / 2,
        failure_persistence: None,
        ..Config::default()
    });
    let stats = std::cell::RefCell::new([0u64; 3]);
    // Mostly structured programs (most of them load and run), some raw
    // slot soups (most of them exercise the load-time checks).
    let program = prop_oneof![
        3 => structured_program(),
        1 => prop::collection::vec(slot_strategy(), 1..24).prop_map(decoding_slots),
    ];
    let strat = (program, packet_strategy(), any::<u8>());
    runner
        .run(&strat, |(mut slots, data, kind)| {
            // End with exit most of the time so more programs load.
            if kind & 1 == 0 {
                slots.push(RawInsn {
                    code: 0x95,
                    ..RawInsn::default()
                });
            }
            run_one(&slots, &data, kind, &mut stats.borrow_mut());
            Ok(())
        })
        .expect("no VM failure");
    let stats = stats.into_inner();
    eprintln!(
        "random: {} undecodable, {} rejected, {} ran",
        stats[0], stats[1], stats[2]
    );
    assert!(stats[2] > 10_000, "too few random programs ran: {stats:?}");
}

#[test]
fn mutated_programs_never_escape() {
    let seeds: Vec<Vec<RawInsn>> = seeds().iter().map(|s| raw(s)).collect();
    let mut runner = TestRunner::new(Config {
        cases: PROGRAMS / 2,
        failure_persistence: None,
        ..Config::default()
    });
    let stats = std::cell::RefCell::new([0u64; 3]);
    let strat = (
        0..seeds.len(),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                0u8..6,
                insn_strategy(),
                slot_strategy(),
            ),
            1..4,
        ),
        packet_strategy(),
        any::<u8>(),
    );
    runner
        .run(&strat, |(s, muts, data, kind)| {
            let mut slots = seeds[s].clone();
            for (at, how, insn, new) in muts {
                let i = at.index(slots.len());
                match how {
                    0 | 1 => {
                        // Replace with a whole instruction.
                        let enc = raw(&[insn]);
                        slots.splice(i..(i + 1).min(slots.len()), enc);
                    }
                    2 => slots[i].off = new.off,
                    3 => slots[i].imm = new.imm,
                    4 => slots[i].dst = new.dst % 11,
                    _ => slots[i].src = new.src % 11,
                }
            }
            run_one(&slots, &data, kind, &mut stats.borrow_mut());
            Ok(())
        })
        .expect("no VM failure");
    let stats = stats.into_inner();
    eprintln!(
        "mutated: {} undecodable, {} rejected, {} ran",
        stats[0], stats[1], stats[2]
    );
    assert!(stats[2] > 5000, "too few mutated programs ran: {stats:?}");
}
