//! Properties: any valid program disassembled in either syntax (with or
//! without labels) assembles back to the same instructions; arbitrary text
//! never panics the assembler, and its errors point inside the text.

use nfkit_isa::*;
use proptest::prelude::*;

fn reg() -> impl Strategy<Value = Reg> {
    (0u8..=10).prop_map(|n| Reg::new(n).unwrap())
}

fn width() -> impl Strategy<Value = Width> {
    prop_oneof![Just(Width::W32), Just(Width::W64)]
}

fn size() -> impl Strategy<Value = Size> {
    prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W), Just(Size::DW)]
}

fn operand() -> impl Strategy<Value = Operand> {
    prop_oneof![
        reg().prop_map(Operand::Reg),
        any::<i32>().prop_map(Operand::Imm)
    ]
}

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        Just(Cond::Eq),
        Just(Cond::Gt),
        Just(Cond::Ge),
        Just(Cond::Set),
        Just(Cond::Ne),
        Just(Cond::Sgt),
        Just(Cond::Sge),
        Just(Cond::Lt),
        Just(Cond::Le),
        Just(Cond::Slt),
        Just(Cond::Sle),
    ]
}

fn alu_op() -> impl Strategy<Value = AluOp> {
    prop_oneof![
        Just(AluOp::Add),
        Just(AluOp::Sub),
        Just(AluOp::Mul),
        Just(AluOp::Div),
        Just(AluOp::SDiv),
        Just(AluOp::Or),
        Just(AluOp::And),
        Just(AluOp::Lsh),
        Just(AluOp::Rsh),
        Just(AluOp::Mod),
        Just(AluOp::SMod),
        Just(AluOp::Xor),
        Just(AluOp::Mov),
        Just(AluOp::Arsh),
    ]
}

fn atomic_op() -> impl Strategy<Value = AtomicOp> {
    prop_oneof![
        any::<bool>().prop_map(|fetch| AtomicOp::Add { fetch }),
        any::<bool>().prop_map(|fetch| AtomicOp::Or { fetch }),
        any::<bool>().prop_map(|fetch| AtomicOp::And { fetch }),
        any::<bool>().prop_map(|fetch| AtomicOp::Xor { fetch }),
        Just(AtomicOp::Xchg),
        Just(AtomicOp::CmpXchg),
    ]
}

fn lddw_kind() -> impl Strategy<Value = LddwKind> {
    prop_oneof![
        Just(LddwKind::Imm64),
        Just(LddwKind::MapFd),
        Just(LddwKind::MapValue),
        Just(LddwKind::BtfId),
        Just(LddwKind::Func),
        Just(LddwKind::MapIdx),
        Just(LddwKind::MapIdxValue),
    ]
}

/// Any instruction the decoder accepts. Each group is weighted by its
/// number of forms, so that every form is as likely as any other.
fn insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        5 => alu_insn(),
        4 => mem_insn(),
        3 => wide_load_insn(),
        4 => jump_insn(),
        3 => call_insn(),
    ]
}

/// ALU-class instructions: operations, negation, sign-extending moves,
/// byte swaps and `addr_space_cast`.
fn alu_insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        (width(), alu_op(), reg(), operand()).prop_map(|(width, op, dst, src)| Insn::Alu {
            width,
            op,
            dst,
            src
        }),
        (width(), reg()).prop_map(|(width, dst)| Insn::Alu {
            width,
            op: AluOp::Neg,
            dst,
            src: Operand::Imm(0)
        }),
        (
            width(),
            prop_oneof![Just(8u8), Just(16), Just(32)],
            reg(),
            reg()
        )
            .prop_map(|(width, bits, dst, src)| Insn::Alu {
                width: if bits == 32 { Width::W64 } else { width },
                op: AluOp::MovSx(bits),
                dst,
                src: Operand::Reg(src)
            }),
        (
            prop_oneof![
                Just(ByteOrder::Le),
                Just(ByteOrder::Be),
                Just(ByteOrder::Swap)
            ],
            prop_oneof![Just(16u8), Just(32), Just(64)],
            reg()
        )
            .prop_map(|(order, bits, dst)| Insn::Endian { order, bits, dst }),
        (reg(), reg(), any::<u16>(), 1u16..).prop_map(|(dst, src, a, b)| Insn::AddrSpaceCast {
            dst,
            src,
            dst_as: b,
            src_as: a
        }),
    ]
}

/// Memory accesses: loads, stores (immediate and register) and atomics.
fn mem_insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        (size(), any::<bool>(), reg(), reg(), any::<i16>()).prop_map(
            |(size, signed, dst, src, off)| Insn::Ldx {
                size,
                signed: signed && size != Size::DW,
                dst,
                src,
                off
            }
        ),
        (size(), reg(), any::<i16>(), any::<i32>()).prop_map(|(size, dst, off, imm)| Insn::St {
            size,
            dst,
            off,
            imm
        }),
        (size(), reg(), reg(), any::<i16>()).prop_map(|(size, dst, src, off)| Insn::Stx {
            size,
            dst,
            src,
            off
        }),
        (
            prop_oneof![Just(Size::W), Just(Size::DW)],
            atomic_op(),
            reg(),
            reg(),
            any::<i16>()
        )
            .prop_map(|(size, op, dst, src, off)| Insn::Atomic {
                size,
                op,
                dst,
                src,
                off
            }),
    ]
}

/// The `ld` class: 64-bit immediates with their pseudo sources, and the
/// legacy packet loads.
fn wide_load_insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        (lddw_kind(), reg(), any::<i32>(), any::<i32>()).prop_map(|(kind, dst, imm, next_imm)| {
            Insn::Lddw {
                kind,
                dst,
                imm,
                next_imm,
            }
        }),
        (
            prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W)],
            any::<i32>()
        )
            .prop_map(|(size, imm)| Insn::LdAbs { size, imm }),
        (
            prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W)],
            reg(),
            any::<i32>()
        )
            .prop_map(|(size, src, imm)| Insn::LdInd { size, src, imm }),
    ]
}

/// Jumps: `ja`, `gotol`, conditional jumps and `may_goto`, with offsets
/// both near (so labels get exercised) and anywhere.
fn jump_insn() -> impl Strategy<Value = Insn> {
    let small_off = -12i16..12;
    prop_oneof![
        prop_oneof![small_off.clone(), any::<i16>()].prop_map(|off| Insn::Ja { off }),
        prop_oneof![-12i32..12, any::<i32>()].prop_map(|imm| Insn::Gotol { imm }),
        (
            width(),
            cond(),
            reg(),
            operand(),
            prop_oneof![small_off.clone(), any::<i16>()]
        )
            .prop_map(|(width, cond, dst, src, off)| Insn::Jmp {
                width,
                cond,
                dst,
                src,
                off
            }),
        small_off.prop_map(|off| Insn::MayGoto { off }),
    ]
}

/// Calls of each kind, `callx` and `exit`.
fn call_insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        (
            prop_oneof![
                Just(CallKind::Helper),
                Just(CallKind::Local),
                Just(CallKind::Kfunc)
            ],
            prop_oneof![-12i32..220, any::<i32>()]
        )
            .prop_map(|(kind, imm)| Insn::Call { kind, imm }),
        reg().prop_map(|reg| Insn::Callx { reg }),
        Just(Insn::Exit),
    ]
}

/// The conformance syntax refuses frame-pointer arithmetic other than
/// mov/add/sub (bpf_conformance's negative `error.data`).
fn conformance_expressible(i: &Insn) -> bool {
    !matches!(i, Insn::Alu { op, src: Operand::Reg(r), .. }
        if *r == Reg::FP && !matches!(op, AluOp::Mov | AluOp::Add | AluOp::Sub))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn disassembly_reassembles_identically(prog in proptest::collection::vec(insn(), 1..40)) {
        // Encoded programs decode to themselves: these are valid programs.
        prop_assert_eq!(&decode_bytes(&encode_bytes(&prog)).unwrap(), &prog);
        for syntax in [Syntax::Llvm, Syntax::Conformance] {
            if syntax == Syntax::Conformance && !prog.iter().all(conformance_expressible) {
                continue;
            }
            for labels in [true, false] {
                let opts = DisasmOptions { syntax, labels, ..Default::default() };
                let text = disassemble(&prog, &opts);
                let back = assemble(&text, Some(syntax));
                prop_assert!(back.is_ok(), "{:?}: {:?}\n{}", syntax, back, text);
                prop_assert_eq!(&back.unwrap(), &prog, "{:?}\n{}", syntax, text);
            }
        }
    }

    #[test]
    fn single_instructions_round_trip(i in insn()) {
        for syntax in [Syntax::Llvm, Syntax::Conformance] {
            if syntax == Syntax::Conformance && !conformance_expressible(&i) {
                continue;
            }
            let text = disasm::format_insn(&i, syntax);
            let back = assemble(&text, Some(syntax));
            prop_assert_eq!(back, Ok(vec![i]), "{}", text);
        }
    }

    #[test]
    fn garbage_text_never_panics(text in "\\PC{0,200}") {
        check_garbage(&text);
    }

    #[test]
    fn token_soup_never_panics(words in proptest::collection::vec(prop_oneof![
        Just("r0"), Just("w1"), Just("%r2"), Just("%r50"), Just("="), Just("+="), Just("s"),
        Just(">>="), Just("*"), Just("("), Just(")"), Just("["), Just("]"), Just("u32"),
        Just("s8"), Just("+"), Just("-"), Just("4"), Just("0x7fffffff"), Just("99999999999999999999"),
        Just("ll"), Just("goto"), Just("if"), Just("=="), Just("lock"), Just("fetch"), Just("add"),
        Just("mov"), Just(","), Just("exit"), Just("call"), Just("local"), Just("L1"), Just(":"),
        Just("\n"), Just("ldxw"), Just("jeq"), Just("lddw"), Just("map_value"), Just("skb"),
        Just("atomic_fetch_add"), Just("xchg_64"), Just("cmpxchg32_32"), Just("be16"),
        Just("addr_space_cast"), Just("gotol"), Just("may_goto"), Just("callx"), Just("#"),
    ], 0..30)) {
        check_garbage(&words.join(" "));
    }
}

fn check_garbage(text: &str) {
    let lines = text.lines().count().max(1);
    for syntax in [None, Some(Syntax::Llvm), Some(Syntax::Conformance)] {
        match assemble_program(text, syntax) {
            Ok(p) => {
                // Whatever assembles also disassembles and reassembles.
                let t = disassemble(&p.insns, &DisasmOptions::default());
                assert_eq!(assemble(&t, Some(Syntax::Llvm)).unwrap(), p.insns);
            }
            Err(e) => {
                assert!(e.line >= 1 && e.line <= lines, "{e} ({lines} lines)");
                assert!(e.col >= 1, "{e}");
                assert!(e
                    .to_string()
                    .starts_with(&format!("line {}:{}: ", e.line, e.col)));
            }
        }
    }
}
