//! The disassembler's output: its exact shape for a small program in each
//! syntax, helper-name comments, labels (and numeric offsets where a target
//! has no instruction), symbols from relocations and caller annotations —
//! all of it text the assembler reads back to the same program.

use nfkit_isa::*;
use std::collections::BTreeMap;

fn sample() -> Vec<Insn> {
    assemble(
        "r1 = 3\nback:\nr1 += -1\nif r1 != 0 goto back\ncall 1\nw0 = (s8)w1\nexit",
        None,
    )
    .unwrap()
}

#[test]
fn llvm_output_shape() {
    let text = disassemble(&sample(), &DisasmOptions::default());
    assert_eq!(
        text,
        "    r1 = 3\nL1:\n    r1 += -1\n    if r1 != 0 goto L1\n    call 1 ; bpf_map_lookup_elem\n    w0 = (s8)w1\n    exit\n"
    );
}

#[test]
fn conformance_output_shape_without_labels_or_names() {
    let opts = DisasmOptions {
        syntax: Syntax::Conformance,
        labels: false,
        helper_names: false,
        ..Default::default()
    };
    let text = disassemble(&sample(), &opts);
    assert_eq!(
        text,
        "    mov %r1, 3\n    add %r1, -1\n    jne %r1, 0, -2\n    call 1\n    movsx832 %r0, %r1\n    exit\n"
    );
    assert_eq!(assemble(&text, None).unwrap(), sample());
}

#[test]
fn targets_without_an_instruction_stay_numeric() {
    // Past the end (+5) and into the middle of an lddw (-3 lands on slot 1).
    let insns = assemble("r1 = 0 ll\ngoto +5\ngoto -3\nexit", None).unwrap();
    let text = disassemble(&insns, &DisasmOptions::default());
    assert!(
        text.contains("goto +5") && text.contains("goto -3"),
        "{text}"
    );
    assert_eq!(assemble(&text, None).unwrap(), insns);
    // A jump to just past the last instruction gets a label at the end.
    let insns = assemble("goto +1\nexit", None).unwrap();
    let text = disassemble(&insns, &DisasmOptions::default());
    assert!(text.ends_with("L2:\n"), "{text}");
    assert_eq!(assemble(&text, None).unwrap(), insns);
}

#[test]
fn symbols_and_annotations_round_trip_as_relocations() {
    let insns = vec![
        Insn::lddw(Reg::R1, 0),
        Insn::Call {
            kind: CallKind::Local,
            imm: -1,
        },
        // A symbol on an instruction that cannot show it in place.
        Insn::lddw(Reg::R2, 16),
        Insn::Exit,
    ];
    let symbols = BTreeMap::from([
        (0, "my_map".to_string()),
        (2, "other_fn".to_string()),
        (3, ".rodata+16".to_string()),
    ]);
    let annotate = |slot: usize| match slot {
        0 => vec![
            Annotation::Label("entry".into()),
            Annotation::Comment("prog.c:3: x = 1".into()),
        ],
        _ => vec![],
    };
    for syntax in [Syntax::Llvm, Syntax::Conformance] {
        let opts = DisasmOptions {
            syntax,
            symbols: symbols.clone(),
            annotate: Some(&annotate),
            ..Default::default()
        };
        let text = disassemble(&insns, &opts);
        assert!(text.starts_with("entry:\n"), "{text}");
        assert!(text.contains("prog.c:3: x = 1"), "{text}");
        assert!(text.contains(".rodata+16"), "{text}");
        let p = assemble_program(&text, Some(syntax)).unwrap();
        assert_eq!(p.insns, insns, "{text}");
        assert_eq!(
            p.relocs,
            [
                SymbolRef {
                    slot: 0,
                    symbol: "my_map".into()
                },
                SymbolRef {
                    slot: 2,
                    symbol: "other_fn".into()
                }
            ],
            "{text}"
        );
    }
}

#[test]
fn every_instruction_formats_on_one_line() {
    for syntax in [Syntax::Llvm, Syntax::Conformance] {
        let text = disasm::format_insn(&Insn::lddw(Reg::R3, u64::MAX), syntax);
        assert!(!text.contains('\n'));
        assert_eq!(
            assemble(&text, Some(syntax)).unwrap(),
            [Insn::lddw(Reg::R3, u64::MAX)]
        );
    }
}
