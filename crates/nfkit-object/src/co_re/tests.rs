//! The resolver on hand-built BTF: flavours, nested access strings and
//! anonymous members, arrays, bitfields, enum values, type relocations,
//! ambiguity, and patching instructions.

use super::*;
use crate::btf::{EnumValue, Kind, Member, Type, INT_SIGNED};
use nfkit_isa::{Insn, Reg, Size};

fn int(b: &mut Btf, name: &str, size: u32, signed: bool) -> u32 {
    b.add(Type::new(
        name,
        Kind::Int {
            size,
            encoding: if signed { INT_SIGNED } else { 0 },
            offset: 0,
            bits: (size * 8) as u8,
        },
    ))
}

/// A member `name` of type `ty` at bit `bits` (bitfield of `width` if > 0).
fn m(name: &str, ty: u32, bits: u32, width: u32) -> Member {
    Member {
        name: name.into(),
        ty,
        bit_offset: bits,
        bitfield_size: width,
    }
}

fn st(b: &mut Btf, name: &str, size: u32, members: Vec<Member>) -> u32 {
    b.add(Type::new(name, Kind::Struct { size, members }))
}

fn relo(kind: CoreKind, type_id: u32, access: &str) -> CoreRelo {
    CoreRelo {
        insn: 0,
        kind,
        type_id,
        access: access.into(),
    }
}

/// The target value of `r` (None: poisoned), resolution errors panic.
fn value(local: &Btf, r: &CoreRelo, target: &Target) -> Option<u64> {
    resolve(local, r, target)
        .unwrap_or_else(|e| panic!("{}: {e}", describe(local, r)))
        .new
}

#[test]
fn flavours_are_ignored_in_type_names_only() {
    assert_eq!(essential_name("task_struct___v2"), "task_struct");
    assert_eq!(essential_name("a___b___c"), "a___b");
    assert_eq!(essential_name("foo"), "foo");
    assert_eq!(essential_name("foo____bar"), "foo____bar");
    assert_eq!(essential_name("___x"), "___x");
}

/// Local `struct sk___old { int a; int b; }`; target `struct sk { int x;
/// long pad; int b; }` and an unrelated `union sk`.
fn moved_field() -> (Btf, u32, Target) {
    let mut l = Btf::new();
    let i = int(&mut l, "int", 4, true);
    let s = st(
        &mut l,
        "sk___old",
        8,
        vec![m("a", i, 0, 0), m("b", i, 32, 0)],
    );
    let mut t = Btf::new();
    let ti = int(&mut t, "int", 4, true);
    let tl = int(&mut t, "long", 8, true);
    t.add(Type::new(
        "sk",
        Kind::Union {
            size: 4,
            members: vec![m("b", tl, 0, 0)],
        },
    ));
    st(
        &mut t,
        "sk",
        24,
        vec![m("x", ti, 0, 0), m("pad", tl, 64, 0), m("b", ti, 128, 0)],
    );
    (l, s, Target::new(t))
}

#[test]
fn field_offset_follows_the_target_layout() {
    let (l, s, t) = moved_field();
    let r = relo(CoreKind::FieldByteOffset, s, "0:1");
    assert_eq!(describe(&l, &r), "byte_off struct sk___old::b");
    let res = resolve(&l, &r, &t).expect("resolves");
    assert_eq!((res.orig, res.new), (4, Some(16)));
    assert_eq!(
        value(&l, &relo(CoreKind::FieldByteSize, s, "0:1"), &t),
        Some(4)
    );
    assert_eq!(
        value(&l, &relo(CoreKind::FieldSigned, s, "0:1"), &t),
        Some(1)
    );
    assert_eq!(
        value(&l, &relo(CoreKind::FieldExists, s, "0:1"), &t),
        Some(1)
    );
    // The root's array index: element 2 of an array of struct sk.
    assert_eq!(
        value(&l, &relo(CoreKind::FieldByteOffset, s, "2:1"), &t),
        Some(2 * 24 + 16)
    );
    // `a` has no counterpart: exists is 0, the offset poisons.
    assert_eq!(
        value(&l, &relo(CoreKind::FieldExists, s, "0:0"), &t),
        Some(0)
    );
    assert_eq!(
        value(&l, &relo(CoreKind::FieldByteOffset, s, "0:0"), &t),
        None
    );
    assert_eq!(
        failure(&relo(CoreKind::FieldByteOffset, s, "0:0")),
        "field not found in the kernel's BTF (access 0:0)"
    );
}

#[test]
fn nested_access_descends_into_anonymous_members() {
    // Local: struct outer { int a; struct inner { short s; int t; } in; }.
    let mut l = Btf::new();
    let i = int(&mut l, "int", 4, true);
    let sh = int(&mut l, "short", 2, true);
    let inner = st(&mut l, "inner", 8, vec![m("s", sh, 0, 0), m("t", i, 32, 0)]);
    let outer = st(
        &mut l,
        "outer",
        12,
        vec![m("a", i, 0, 0), m("in", inner, 32, 0)],
    );
    // Target: struct outer { long z; union { int q; struct inner in; }; }
    // with struct inner { int t; short s; }.
    let mut t = Btf::new();
    let ti = int(&mut t, "int", 4, true);
    let tsh = int(&mut t, "short", 2, true);
    let tl = int(&mut t, "long", 8, true);
    let tinner = st(
        &mut t,
        "inner",
        8,
        vec![m("t", ti, 0, 0), m("s", tsh, 32, 0)],
    );
    let anon = t.add(Type::new(
        "",
        Kind::Union {
            size: 8,
            members: vec![m("q", ti, 0, 0), m("in", tinner, 0, 0)],
        },
    ));
    st(
        &mut t,
        "outer",
        16,
        vec![m("z", tl, 0, 0), m("", anon, 64, 0)],
    );
    let t = Target::new(t);
    let r = relo(CoreKind::FieldByteOffset, outer, "0:1:1");
    assert_eq!(describe(&l, &r), "byte_off struct outer::in.t");
    assert_eq!(resolve(&l, &r, &t).unwrap().orig, 8);
    assert_eq!(value(&l, &r, &t), Some(8));
    let r = relo(CoreKind::FieldByteOffset, outer, "0:1:0");
    assert_eq!(value(&l, &r, &t), Some(12));
    // `in` itself is found inside the anonymous union.
    let r = relo(CoreKind::FieldExists, outer, "0:1");
    assert_eq!(value(&l, &r, &t), Some(1));
}

#[test]
fn array_elements_are_bounded_by_the_target() {
    let mut l = Btf::new();
    let i = int(&mut l, "unsigned int", 4, false);
    let idx = int(&mut l, "__ARRAY_SIZE_TYPE__", 4, false);
    let arr = l.add(Type::new(
        "",
        Kind::Array {
            elem: i,
            index: idx,
            nelems: 4,
        },
    ));
    let s = st(&mut l, "s", 16, vec![m("arr", arr, 0, 0)]);
    let mut t = Btf::new();
    let ti = int(&mut t, "unsigned int", 4, false);
    let tidx = int(&mut t, "__ARRAY_SIZE_TYPE__", 4, false);
    let tarr = t.add(Type::new(
        "",
        Kind::Array {
            elem: ti,
            index: tidx,
            nelems: 3,
        },
    ));
    let tl = int(&mut t, "long", 8, true);
    st(
        &mut t,
        "s",
        24,
        vec![m("pad", tl, 0, 0), m("arr", tarr, 64, 0)],
    );
    let t = Target::new(t);
    let r = relo(CoreKind::FieldByteOffset, s, "0:0:2");
    assert_eq!(describe(&l, &r), "byte_off struct s::arr[2]");
    assert_eq!(value(&l, &r, &t), Some(8 + 2 * 4));
    assert_eq!(
        value(&l, &relo(CoreKind::FieldByteSize, s, "0:0:2"), &t),
        Some(4)
    );
    // Element 3 exists locally, not in the kernel's 3-element array.
    assert_eq!(
        value(&l, &relo(CoreKind::FieldByteOffset, s, "0:0:3"), &t),
        None
    );
    // Shifts make no sense on an array element.
    assert!(resolve(&l, &relo(CoreKind::FieldLshiftU64, s, "0:0:1"), &t).is_err());
    // An index beyond the local array is a malformed relocation.
    assert!(resolve(&l, &relo(CoreKind::FieldByteOffset, s, "0:0:9"), &t).is_err());
}

#[test]
fn bitfields_give_load_size_and_shifts() {
    let mut l = Btf::new();
    let u = int(&mut l, "unsigned int", 4, false);
    let s = st(&mut l, "bf", 4, vec![m("a", u, 0, 3), m("c", u, 3, 20)]);
    let mut t = Btf::new();
    let tu = int(&mut t, "unsigned int", 4, false);
    let tc = int(&mut t, "unsigned char", 1, false);
    let ts = int(&mut t, "int", 4, true);
    st(
        &mut t,
        "bf",
        8,
        vec![
            m("a", tc, 6, 4),
            m("b", tu, 8, 5),
            m("c", tu, 13, 20),
            m("d", ts, 40, 7),
        ],
    );
    let t = Target::new(t);
    let v = |k: CoreKind, acc: &str| value(&l, &relo(k, s, acc), &t).expect("resolves");
    // c: bits 13..33 of a 4-byte unit: needs an 8-byte load at 0.
    assert_eq!(v(CoreKind::FieldByteOffset, "0:1"), 0);
    assert_eq!(v(CoreKind::FieldByteSize, "0:1"), 8);
    assert_eq!(v(CoreKind::FieldLshiftU64, "0:1"), 64 - 33);
    assert_eq!(v(CoreKind::FieldRshiftU64, "0:1"), 64 - 20);
    assert_eq!(v(CoreKind::FieldSigned, "0:1"), 0);
    // a: a 1-byte unit at bits 6..10 straddles: a 2-byte load.
    assert_eq!(v(CoreKind::FieldByteSize, "0:0"), 2);
    assert_eq!(v(CoreKind::FieldLshiftU64, "0:0"), 64 - 10);
    assert_eq!(v(CoreKind::FieldRshiftU64, "0:0"), 60);
}

fn enums() -> (Btf, u32, Target) {
    let mut l = Btf::new();
    let e = l.add(Type::new(
        "color___mine",
        Kind::Enum {
            size: 4,
            signed: false,
            values: vec![
                EnumValue {
                    name: "RED".into(),
                    value: 0,
                },
                EnumValue {
                    name: "BLUE___old".into(),
                    value: 1,
                },
                EnumValue {
                    name: "PINK".into(),
                    value: 2,
                },
            ],
        },
    ));
    let mut t = Btf::new();
    t.add(Type::new(
        "color",
        Kind::Enum64 {
            size: 8,
            signed: false,
            values: vec![
                EnumValue {
                    name: "BLUE".into(),
                    value: 1 << 40,
                },
                EnumValue {
                    name: "RED".into(),
                    value: 5,
                },
            ],
        },
    ));
    (l, e, Target::new(t))
}

#[test]
fn enum_values_come_from_the_target() {
    let (l, e, t) = enums();
    let r = relo(CoreKind::EnumvalValue, e, "1");
    assert_eq!(
        describe(&l, &r),
        "enumval_value enum color___mine::BLUE___old"
    );
    assert_eq!(value(&l, &r, &t), Some(1 << 40));
    assert_eq!(
        value(&l, &relo(CoreKind::EnumvalValue, e, "0"), &t),
        Some(5)
    );
    assert_eq!(
        value(&l, &relo(CoreKind::EnumvalExists, e, "0"), &t),
        Some(1)
    );
    assert_eq!(
        value(&l, &relo(CoreKind::EnumvalExists, e, "2"), &t),
        Some(0)
    );
    assert_eq!(value(&l, &relo(CoreKind::EnumvalValue, e, "2"), &t), None);
}

#[test]
fn type_relocations() {
    let (l, s, t) = moved_field();
    let v = |k: CoreKind| value(&l, &relo(k, s, "0"), &t);
    assert_eq!(v(CoreKind::TypeExists), Some(1));
    assert_eq!(v(CoreKind::TypeSize), Some(24));
    assert_eq!(v(CoreKind::TypeIdTarget), Some(4));
    assert_eq!(v(CoreKind::TypeIdLocal), Some(u64::from(s)));
    // type_matches is stricter: the target's `b` is an int, the local
    // one too, but the local `a` has no counterpart.
    assert_eq!(v(CoreKind::TypeMatches), Some(0));
    let mut l2 = Btf::new();
    let i = int(&mut l2, "int", 4, true);
    let s2 = st(&mut l2, "sk___v", 4, vec![m("b", i, 0, 0)]);
    assert_eq!(
        value(&l2, &relo(CoreKind::TypeMatches, s2, "0"), &t),
        Some(1)
    );
    let mut l3 = Btf::new();
    let i3 = int(&mut l3, "int", 8, true);
    let s3 = st(&mut l3, "sk", 4, vec![m("b", i3, 0, 0)]);
    assert_eq!(
        value(&l3, &relo(CoreKind::TypeMatches, s3, "0"), &t),
        Some(0)
    );
    // A type the target lacks: 0, not a poison.
    let mut l4 = Btf::new();
    let n = st(&mut l4, "nope", 4, vec![]);
    assert_eq!(value(&l4, &relo(CoreKind::TypeExists, n, "0"), &t), Some(0));
    assert_eq!(value(&l4, &relo(CoreKind::TypeSize, n, "0"), &t), Some(0));
    // Type relocations take access "0" only.
    assert!(resolve(&l, &relo(CoreKind::TypeSize, s, "1"), &t).is_err());
}

#[test]
fn two_targets_that_disagree_are_ambiguous() {
    let (l, s, _) = moved_field();
    let mut t = Btf::new();
    let ti = int(&mut t, "int", 4, true);
    st(&mut t, "sk", 8, vec![m("b", ti, 0, 0)]);
    st(&mut t, "sk___2", 8, vec![m("b", ti, 32, 0)]);
    let t = Target::new(t);
    let e = resolve(&l, &relo(CoreKind::FieldByteOffset, s, "0:1"), &t).unwrap_err();
    assert!(e.contains("ambiguous"), "{e}");
}

#[test]
fn patching_writes_offsets_sizes_and_immediates() {
    // Local u32 field, kernel u64 (unsigned): the load grows to 8 bytes.
    let mut l = Btf::new();
    let u = int(&mut l, "u32", 4, false);
    let s = st(&mut l, "p", 8, vec![m("x", u, 32, 0)]);
    let mut t = Btf::new();
    let u64t = int(&mut t, "u64", 8, false);
    let s64 = int(&mut t, "s64", 8, true);
    st(
        &mut t,
        "p",
        24,
        vec![m("y", s64, 0, 0), m("x", u64t, 128, 0)],
    );
    let t = Target::new(t);
    let res = resolve(&l, &relo(CoreKind::FieldByteOffset, s, "0:0"), &t).unwrap();
    let ldx = Insn::Ldx {
        size: Size::W,
        signed: false,
        dst: Reg::R0,
        src: Reg::R1,
        off: 4,
    };
    assert_eq!(
        patch(ldx, &res).unwrap(),
        Insn::Ldx {
            size: Size::DW,
            signed: false,
            dst: Reg::R0,
            src: Reg::R1,
            off: 16
        }
    );
    // The instruction must hold what the local types give.
    let wrong = Insn::Ldx {
        size: Size::W,
        signed: false,
        dst: Reg::R0,
        src: Reg::R1,
        off: 6,
    };
    assert!(patch(wrong, &res).is_err());
    // A signed field of another size cannot be read with another size.
    let mut l2 = Btf::new();
    let i = int(&mut l2, "s32", 4, true);
    let s2 = st(&mut l2, "p", 4, vec![m("y", i, 0, 0)]);
    let res = resolve(&l2, &relo(CoreKind::FieldByteOffset, s2, "0:0"), &t).unwrap();
    let ld0 = Insn::Ldx {
        size: Size::W,
        signed: false,
        dst: Reg::R0,
        src: Reg::R1,
        off: 0,
    };
    assert!(patch(ld0, &res).is_err());
    // A 64-bit value goes into both halves of lddw.
    let (l, e, t) = enums();
    let res = resolve(&l, &relo(CoreKind::EnumvalValue, e, "1"), &t).unwrap();
    let lddw = Insn::Lddw {
        kind: nfkit_isa::LddwKind::Imm64,
        dst: Reg::R1,
        imm: 1,
        next_imm: 0,
    };
    let Insn::Lddw { imm, next_imm, .. } = patch(lddw, &res).unwrap() else {
        panic!("still an lddw");
    };
    assert_eq!((imm, next_imm), (0, 1 << 8));
    assert_eq!(poison(&lddw).len(), 2);
}

/// `dst = imm` (64-bit, or 32-bit when `w32`).
fn mov(dst: Reg, imm: i32, w32: bool) -> Insn {
    Insn::Alu {
        width: if w32 {
            nfkit_isa::Width::W32
        } else {
            nfkit_isa::Width::W64
        },
        op: nfkit_isa::AluOp::Mov,
        dst,
        src: nfkit_isa::Operand::Imm(imm),
    }
}

/// The poisoned slots entry 0 of a program of `insns` reaches, given a
/// guard `r1 = v; if r1 cond 0 goto +1; <poison>; r0 = 2; exit`.
fn guarded(set: Insn, width: nfkit_isa::Width, cond: nfkit_isa::Cond) -> Vec<usize> {
    let insns = vec![
        set,
        Insn::Jmp {
            width,
            cond,
            dst: Reg::R1,
            src: nfkit_isa::Operand::Imm(0),
            off: 1,
        },
        Insn::Call {
            kind: nfkit_isa::CallKind::Helper,
            imm: POISON_HELPER,
        },
        mov(Reg::R0, 2, false),
        Insn::Exit,
    ];
    let image = crate::Image::from_insns("p", crate::ProgType::Xdp, insns);
    poisons_reached(&image, 0)
}

#[test]
fn poisons_behind_constant_false_guards_are_not_reached() {
    use nfkit_isa::{Cond, Width};
    // bpf_core_field_exists relocated to 0: the guard skips the poison.
    assert_eq!(
        guarded(mov(Reg::R1, 0, false), Width::W64, Cond::Eq),
        Vec::<usize>::new()
    );
    // ... and to 1: the poison runs.
    assert_eq!(
        guarded(mov(Reg::R1, 1, false), Width::W64, Cond::Eq),
        vec![2]
    );
    // 32-bit compares see the low half, signed.
    assert_eq!(
        guarded(mov(Reg::R1, -1, true), Width::W32, Cond::Slt),
        Vec::<usize>::new()
    );
    assert_eq!(
        guarded(mov(Reg::R1, -1, true), Width::W64, Cond::Slt),
        vec![2]
    );
    // A value from memory is unknown: both ways are taken.
    let load = Insn::Ldx {
        size: Size::W,
        signed: false,
        dst: Reg::R1,
        src: Reg::R1,
        off: 0,
    };
    assert_eq!(guarded(load, Width::W64, Cond::Eq), vec![2]);
}

#[test]
fn core_error_names_the_reached_relocation() {
    let insns = vec![
        Insn::Call {
            kind: nfkit_isa::CallKind::Helper,
            imm: POISON_HELPER,
        },
        Insn::Exit,
    ];
    let mut image = crate::Image::from_insns("xdp_prog", crate::ProgType::Xdp, insns);
    assert_eq!(image.core_error(0), None, "no failed site, no error");
    image.core_sites.push(crate::CoreSite {
        slot: 0,
        function: "xdp_prog".into(),
        func_slot: 0,
        what: "byte_off struct x___y::nope".into(),
        result: Err("byte_off struct x___y::nope: field not found".into()),
    });
    assert_eq!(
        image.core_error(0).as_deref(),
        Some("CO-RE relocation in 'xdp_prog' at insn 0: byte_off struct x___y::nope: field not found")
    );
}

#[test]
fn malformed_relocations_are_errors_not_crashes() {
    let (l, s, t) = moved_field();
    for (kind, ty, access) in [
        (CoreKind::FieldByteOffset, 999, "0:0"),
        (CoreKind::FieldByteOffset, s, "x:y"),
        (CoreKind::FieldByteOffset, s, "0:99"),
        (CoreKind::FieldByteOffset, s, ""),
        (CoreKind::FieldByteOffset, 0, "0"),
        (CoreKind::EnumvalValue, s, "0"),
        (CoreKind::Other(77), s, "0"),
        (CoreKind::FieldByteOffset, s, &"0:".repeat(100)),
        (CoreKind::FieldByteOffset, s, "4294967295:1"),
    ] {
        let r = relo(kind, ty, access);
        let _ = describe(&l, &r);
        let _ = note(Some(&l), &r);
        if let Ok(res) = resolve(&l, &r, &t) {
            assert!(
                access.starts_with("4294967295"),
                "{kind:?} {ty} {access}: {res:?}"
            );
        }
    }
}
