//! The ELF writer: every corpus object, read, linked and written again,
//! reads back to the same Image; writing is stable; Images without BTF
//! and linked Images are written too; what cannot be written is an error.

use nfkit_isa::{CallKind, Insn, LddwKind, Reg};
use nfkit_object::{link, read_object, write_object, Image, ProgType};

fn roundtrip(name: &str, img: &Image) -> (Vec<u8>, Image) {
    let bytes = write_object(img).unwrap_or_else(|e| panic!("{name}: write: {e}"));
    let back = Image::from_elf(&bytes, name).unwrap_or_else(|e| panic!("{name}: read back: {e}"));
    (bytes, back)
}

#[test]
fn every_corpus_object_round_trips() {
    for (name, obj) in nfkit_corpus::objects() {
        let img = Image::from_elf(obj, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (bytes, back) = roundtrip(name, &img);
        assert_eq!(back.insns, img.insns, "{name}");
        assert_eq!(back.functions, img.functions, "{name}");
        assert_eq!(back.entries, img.entries, "{name}");
        assert_eq!(back.maps, img.maps, "{name}");
        assert_eq!(back.line_info, img.line_info, "{name}");
        assert_eq!(back.map_inits, img.map_inits, "{name}");
        assert_eq!(back.license, img.license, "{name}");
        let (old, new) = (img.btf.as_ref().unwrap(), back.btf.as_ref().unwrap());
        if nfkit_corpus::LIBBPF_REFUSES.contains(&name) {
            // Legacy maps get new BTF-defined definitions, appended.
            assert_eq!(old.types(), &new.types()[..old.types().len()], "{name}");
            assert!(new.find_datasec(".maps").is_some(), "{name}");
        } else {
            assert_eq!(old, new, "{name}");
            assert_eq!(back, img, "{name}");
        }
        // Writing what was read back gives the same bytes.
        let again = write_object(&back).unwrap_or_else(|e| panic!("{name}: rewrite: {e}"));
        assert_eq!(again, bytes, "{name}: writing is not stable");
    }
}

#[test]
fn written_objects_keep_func_and_line_info() {
    for (name, obj) in nfkit_corpus::objects() {
        let img = Image::from_elf(obj, name).unwrap();
        let bytes = write_object(&img).unwrap();
        let o = read_object(&bytes, name).unwrap();
        for f in &o.functions {
            assert!(f.btf_id.is_some(), "{name}: {} has no func_info", f.name);
            assert_eq!(
                f.line_info.first().map(|l| l.slot),
                Some(0),
                "{name}: {} has no line info at its start",
                f.name
            );
        }
    }
}

fn r(n: u8) -> Reg {
    Reg::new(n).unwrap()
}

/// `r0 = 2; exit` and friends, with no BTF at all.
#[test]
fn image_without_btf_gets_synthesised_btf() {
    let insns = vec![
        Insn::Alu {
            op: nfkit_isa::AluOp::Mov,
            width: nfkit_isa::Width::W64,
            dst: r(0),
            src: nfkit_isa::Operand::Imm(2),
        },
        Insn::Exit,
    ];
    let img = Image::from_insns("pass_all", ProgType::Xdp, insns);
    let (_, back) = roundtrip("asm", &img);
    assert_eq!(back.insns, img.insns);
    assert_eq!(back.entries[0].section, "xdp");
    assert_eq!(back.entries[0].prog_type, ProgType::Xdp);
    let btf = back.btf.as_ref().expect("btf");
    let sig = btf
        .func_signature(back.functions[0].btf_id.expect("func_info"))
        .unwrap();
    assert_eq!(sig.c_decl, "int pass_all(void *ctx)");
}

#[test]
fn global_function_without_btf_is_an_error() {
    let mut img = Image::from_insns(
        "main",
        ProgType::Xdp,
        vec![
            Insn::Call {
                kind: CallKind::Local,
                imm: 1,
            },
            Insn::Exit,
            Insn::Alu {
                op: nfkit_isa::AluOp::Mov,
                width: nfkit_isa::Width::W64,
                dst: r(0),
                src: nfkit_isa::Operand::Imm(1),
            },
            Insn::Exit,
        ],
    );
    img.functions[0].len = 2;
    let mut helper = img.functions[0].clone();
    helper.name = "helper".into();
    helper.start = 2;
    img.functions.push(helper);
    let err = write_object(&img).unwrap_err().to_string();
    assert!(err.contains("global function 'helper'"), "{err}");
    // Static, it gets a synthesised prototype.
    img.functions[1].global = false;
    let (_, back) = roundtrip("two", &img);
    assert_eq!(back.insns, img.insns);
    assert_eq!(back.functions.len(), 2);
    assert!(!back.functions[1].global);
}

#[test]
fn bad_images_are_errors() {
    let base = Image::from_insns("p", ProgType::Xdp, vec![Insn::Exit]);
    // A map index that does not exist.
    let mut img = base.clone();
    img.insns = vec![
        Insn::Lddw {
            kind: LddwKind::MapIdx,
            dst: r(1),
            imm: 3,
            next_imm: 0,
        },
        Insn::Exit,
    ];
    img.functions[0].len = 3;
    let err = write_object(&img).unwrap_err().to_string();
    assert!(err.contains("p+0") && err.contains("map 3"), "{err}");
    // A call that lands inside a function.
    let mut img = base.clone();
    img.insns = vec![
        Insn::Call {
            kind: CallKind::Local,
            imm: 0,
        },
        Insn::Exit,
    ];
    img.functions[0].len = 2;
    let err = write_object(&img).unwrap_err().to_string();
    assert!(err.contains("p+0") && err.contains("call"), "{err}");
    // An entry whose section gives another program type.
    let mut img = base;
    img.entries[0].section = "tc".into();
    let err = write_object(&img).unwrap_err().to_string();
    assert!(err.contains("section 'tc'"), "{err}");
}

#[test]
fn linked_objects_are_written_as_one() {
    let a = nfkit_corpus::get("xdp_port_filter").unwrap();
    let b = nfkit_corpus::get("tc_proto_stats").unwrap();
    let objs = [
        read_object(a.object, a.name).unwrap(),
        read_object(b.object, b.name).unwrap(),
    ];
    let img = link(&objs).unwrap();
    let (_, back) = roundtrip("linked", &img);
    assert_eq!(back.insns, img.insns);
    assert_eq!(back.maps, img.maps);
    let names: Vec<&str> = back.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["xdp_port_filter", "tc_proto_stats"]);
}

#[test]
fn functions_must_tile_the_instructions() {
    let mut img = Image::from_insns("p", ProgType::Xdp, vec![Insn::Exit, Insn::Exit]);
    img.functions[0].len = 1;
    let err = write_object(&img).unwrap_err().to_string();
    assert!(
        err.contains("slots 1..2") && err.contains("no function"),
        "{err}"
    );
    img.functions[0].start = 1;
    let err = write_object(&img).unwrap_err().to_string();
    assert!(
        err.contains("function 'p'") && err.contains("gaps"),
        "{err}"
    );
}

#[test]
fn global_data_offsets_are_checked() {
    let e = nfkit_corpus::get("xdp_globals").unwrap();
    let mut img = Image::from_elf(e.object, e.name).unwrap();
    let (ri, _) = img.map(".rodata").unwrap();
    let bad = img
        .insns
        .iter_mut()
        .find_map(|i| match i {
            Insn::Lddw {
                kind: LddwKind::MapIdxValue,
                imm,
                next_imm,
                ..
            } if *imm == ri as i32 => Some(next_imm),
            _ => None,
        })
        .expect("a .rodata load");
    *bad = 4096;
    let err = write_object(&img).unwrap_err().to_string();
    assert!(err.contains("offset 4096 is outside map"), "{err}");
}

mod mutated {
    use super::*;
    use proptest::prelude::*;

    /// One change to an Image that a buggy producer could make.
    #[derive(Clone, Debug)]
    enum Edit {
        FuncLen(prop::sample::Index, usize),
        FuncStart(prop::sample::Index, usize),
        EntryFunction(prop::sample::Index, usize),
        EntrySection(prop::sample::Index, &'static str),
        InsnImm(prop::sample::Index, i32),
        MapValueSize(prop::sample::Index, u32),
        BtfId(prop::sample::Index, u32),
        MapInit(usize, u32, usize),
        LineSlot(prop::sample::Index, usize),
        DropMap,
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let small = 0usize..400;
        prop_oneof![
            (any::<prop::sample::Index>(), small.clone()).prop_map(|(i, v)| Edit::FuncLen(i, v)),
            (any::<prop::sample::Index>(), small.clone()).prop_map(|(i, v)| Edit::FuncStart(i, v)),
            (any::<prop::sample::Index>(), 0usize..8).prop_map(|(i, v)| Edit::EntryFunction(i, v)),
            (
                any::<prop::sample::Index>(),
                prop::sample::select(vec!["", "xdp", "tc", ".text", "socket", "bogus/x"])
            )
                .prop_map(|(i, v)| Edit::EntrySection(i, v)),
            (any::<prop::sample::Index>(), -70000i32..70000).prop_map(|(i, v)| Edit::InsnImm(i, v)),
            (any::<prop::sample::Index>(), 0u32..100).prop_map(|(i, v)| Edit::MapValueSize(i, v)),
            (any::<prop::sample::Index>(), 0u32..200).prop_map(|(i, v)| Edit::BtfId(i, v)),
            (0usize..6, 0u32..40, 0usize..6).prop_map(|(m, s, e)| Edit::MapInit(m, s, e)),
            (any::<prop::sample::Index>(), small).prop_map(|(i, v)| Edit::LineSlot(i, v)),
            Just(Edit::DropMap),
        ]
    }

    fn apply(img: &mut Image, e: &Edit) {
        match e {
            Edit::FuncLen(i, v) if !img.functions.is_empty() => {
                let n = img.functions.len();
                img.functions[i.index(n)].len = *v;
            }
            Edit::FuncStart(i, v) if !img.functions.is_empty() => {
                let n = img.functions.len();
                img.functions[i.index(n)].start = *v;
            }
            Edit::EntryFunction(i, v) if !img.entries.is_empty() => {
                let n = img.entries.len();
                img.entries[i.index(n)].function = *v;
            }
            Edit::EntrySection(i, v) if !img.entries.is_empty() => {
                let n = img.entries.len();
                img.entries[i.index(n)].section = v.to_string();
            }
            Edit::InsnImm(i, v) if !img.insns.is_empty() => {
                let n = img.insns.len();
                match &mut img.insns[i.index(n)] {
                    Insn::Lddw { imm, .. } | Insn::Call { imm, .. } => *imm = *v,
                    Insn::Jmp { off, .. } | Insn::Ja { off } => *off = *v as i16,
                    _ => {}
                }
            }
            Edit::MapValueSize(i, v) if !img.maps.is_empty() => {
                let n = img.maps.len();
                img.maps[i.index(n)].value_size = *v;
            }
            Edit::BtfId(i, v) if !img.functions.is_empty() => {
                let n = img.functions.len();
                img.functions[i.index(n)].btf_id = Some(*v);
            }
            Edit::MapInit(map, slot, entry) => img.map_inits.push(nfkit_object::MapInit {
                map: *map,
                slot: *slot,
                entry: *entry,
            }),
            Edit::LineSlot(i, v) if !img.line_info.is_empty() => {
                let n = img.line_info.len();
                img.line_info[i.index(n)].slot = *v;
            }
            Edit::DropMap => {
                img.maps.pop();
            }
            _ => {}
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

        /// A damaged Image is written or refused with a one-line error,
        /// never a panic; what is written reads back.
        #[test]
        fn damaged_images_never_panic(which in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 1..4)) {
            let all = nfkit_corpus::objects();
            let (name, obj) = all[which.index(all.len())];
            let mut img = Image::from_elf(obj, name).unwrap();
            for e in &edits {
                apply(&mut img, e);
            }
            match write_object(&img) {
                Ok(bytes) => {
                    // What the writer accepts, the reader reads.
                    let back = Image::from_elf(&bytes, name);
                    prop_assert!(back.is_ok(), "{:?}", back.err().map(|e| e.to_string()));
                }
                Err(e) => {
                    let msg = e.to_string();
                    prop_assert!(!msg.contains('\n'), "{}", msg);
                }
            }
        }
    }
}
