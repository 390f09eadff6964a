//! Every llvm-syntax form of the toolchain issue against encodings worked
//! out by hand from the opcode tables of RFC 9669 (class | source | op, or
//! class | size | mode), not from the assembler itself.

use nfkit_isa::*;

/// One expected slot: opcode, dst, src, offset, imm.
fn raw(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

fn slots(text: &str, syntax: Option<Syntax>) -> Vec<RawInsn> {
    let insns = assemble(text, syntax).unwrap_or_else(|e| panic!("`{text}`: {e}"));
    encode_program(&insns)
}

#[track_caller]
fn check(text: &str, expected: &[RawInsn]) {
    assert_eq!(slots(text, Some(Syntax::Llvm)), expected, "`{text}`");
    // The same text also assembles without naming the syntax.
    assert_eq!(slots(text, None), expected, "`{text}` (detected)");
}

#[test]
fn alu() {
    check("r0 = 1", &[raw(0xb7, 0, 0, 0, 1)]);
    check("w0 = w1", &[raw(0xbc, 0, 1, 0, 0)]);
    check("r3 = r10", &[raw(0xbf, 3, 10, 0, 0)]);
    check("r0 += r1", &[raw(0x0f, 0, 1, 0, 0)]);
    check("w2 -= 7", &[raw(0x14, 2, 0, 0, 7)]);
    check("r1 *= 3", &[raw(0x27, 1, 0, 0, 3)]);
    check("w1 /= w2", &[raw(0x3c, 1, 2, 0, 0)]);
    check("r1 |= 0x10", &[raw(0x47, 1, 0, 0, 16)]);
    check("r1 &= r2", &[raw(0x5f, 1, 2, 0, 0)]);
    check("w0 <<= 3", &[raw(0x64, 0, 0, 0, 3)]);
    check("r0 >>= 1", &[raw(0x77, 0, 0, 0, 1)]);
    check("r0 %= r5", &[raw(0x9f, 0, 5, 0, 0)]);
    check("w4 ^= -1", &[raw(0xa4, 4, 0, 0, -1)]);
    check("r1 s>>= r2", &[raw(0xcf, 1, 2, 0, 0)]);
    check("r0 = -r0", &[raw(0x87, 0, 0, 0, 0)]);
    check("w1 = -w1", &[raw(0x84, 1, 0, 0, 0)]);
}

#[test]
fn signed_division_and_sign_extension() {
    check("r0 s/= r1", &[raw(0x3f, 0, 1, 1, 0)]);
    check("w0 s/= 3", &[raw(0x34, 0, 0, 1, 3)]);
    check("r0 s%= 3", &[raw(0x97, 0, 0, 1, 3)]);
    check("w1 s%= w2", &[raw(0x9c, 1, 2, 1, 0)]);
    check("r0 = (s16)r1", &[raw(0xbf, 0, 1, 16, 0)]);
    check("r0 = (s8)r1", &[raw(0xbf, 0, 1, 8, 0)]);
    check("r0 = (s32)r1", &[raw(0xbf, 0, 1, 32, 0)]);
    check("w0 = (s8)w1", &[raw(0xbc, 0, 1, 8, 0)]);
    check("w0 = (s16)w1", &[raw(0xbc, 0, 1, 16, 0)]);
}

#[test]
fn immediates_decimal_and_hex() {
    check("r0 = 0xffffffff", &[raw(0xb7, 0, 0, 0, -1)]);
    check("r0 = -0x10", &[raw(0xb7, 0, 0, 0, -16)]);
    check("r0 = 2147483647", &[raw(0xb7, 0, 0, 0, i32::MAX)]);
    check("r0 = -2147483648", &[raw(0xb7, 0, 0, 0, i32::MIN)]);
    for bad in ["r0 = 2147483648", "r0 = 0x100000000", "r0 = -2147483649"] {
        assert!(assemble(bad, Some(Syntax::Llvm)).is_err(), "{bad}");
    }
}

#[test]
fn loads_and_stores() {
    check("r0 = *(u32 *)(r1 + 4)", &[raw(0x61, 0, 1, 4, 0)]);
    check("r0 = *(u8 *)(r1 + 0)", &[raw(0x71, 0, 1, 0, 0)]);
    check("r2 = *(u16 *)(r3 - 6)", &[raw(0x69, 2, 3, -6, 0)]);
    check("r0 = *(u64 *)(r10 - 8)", &[raw(0x79, 0, 10, -8, 0)]);
    check("w0 = *(u8 *)(r1 + 0)", &[raw(0x71, 0, 1, 0, 0)]);
    check("r0 = *(s8 *)(r1 + 0)", &[raw(0x91, 0, 1, 0, 0)]);
    check("r0 = *(s16 *)(r1 - 2)", &[raw(0x89, 0, 1, -2, 0)]);
    check("r0 = *(s32 *)(r1 + 8)", &[raw(0x81, 0, 1, 8, 0)]);
    check("*(u8 *)(r10 - 1) = r2", &[raw(0x73, 10, 2, -1, 0)]);
    check("*(u16 *)(r1 + 2) = r3", &[raw(0x6b, 1, 3, 2, 0)]);
    check("*(u32 *)(r1 + 0) = w2", &[raw(0x63, 1, 2, 0, 0)]);
    check("*(u64 *)(r10 - 8) = 7", &[raw(0x7a, 10, 0, -8, 7)]);
    check("*(u32 *)(r1 + 4) = -1", &[raw(0x62, 1, 0, 4, -1)]);
    check("r0 = *(u8 *)skb[12]", &[raw(0x30, 0, 0, 0, 12)]);
    check("r0 = *(u16 *)skb[r1 + 2]", &[raw(0x48, 0, 1, 0, 2)]);
    check("r0 = *(u32 *)skb[r6]", &[raw(0x40, 0, 6, 0, 0)]);
    assert!(assemble("w0 = *(u64 *)(r1 + 0)", Some(Syntax::Llvm)).is_err());
    assert!(assemble("r0 = *(u32 *)(r1 + 32768)", Some(Syntax::Llvm)).is_err());
}

#[test]
fn jumps() {
    check("if r1 == 5 goto +2", &[raw(0x15, 1, 0, 2, 5)]);
    check("if w1 > 3 goto +1", &[raw(0x26, 1, 0, 1, 3)]);
    check("if r1 != r2 goto -3", &[raw(0x5d, 1, 2, -3, 0)]);
    check("if r1 >= 1 goto +0", &[raw(0x35, 1, 0, 0, 1)]);
    check("if r1 & 1 goto +4", &[raw(0x45, 1, 0, 4, 1)]);
    check("if r1 < r3 goto +1", &[raw(0xad, 1, 3, 1, 0)]);
    check("if w1 <= w3 goto +1", &[raw(0xbe, 1, 3, 1, 0)]);
    check("if r1 s> 0 goto +1", &[raw(0x65, 1, 0, 1, 0)]);
    check("if r1 s>= r2 goto +1", &[raw(0x7d, 1, 2, 1, 0)]);
    check("if r1 s< r2 goto -1", &[raw(0xcd, 1, 2, -1, 0)]);
    check("if w1 s<= -1 goto +1", &[raw(0xd6, 1, 0, 1, -1)]);
    check("goto +1", &[raw(0x05, 0, 0, 1, 0)]);
    check("gotol +70000", &[raw(0x06, 0, 0, 0, 70000)]);
    check("may_goto +1", &[raw(0xe5, 0, 0, 1, 0)]);
    assert!(assemble("if r1 == w2 goto +1", Some(Syntax::Llvm)).is_err());
    assert!(assemble("goto +32768", Some(Syntax::Llvm)).is_err());
}

#[test]
fn labels() {
    check(
        "if r1 == 0 goto out\nr0 = 1\nout:\nexit",
        &[
            raw(0x15, 1, 0, 1, 0),
            raw(0xb7, 0, 0, 0, 1),
            raw(0x95, 0, 0, 0, 0),
        ],
    );
    // Backwards, across an lddw (two slots), and with gotol.
    check(
        "LBB0_1:\nr1 = 0 ll\ngoto LBB0_1\ngotol LBB0_1",
        &[
            raw(0x18, 1, 0, 0, 0),
            raw(0, 0, 0, 0, 0),
            raw(0x05, 0, 0, -3, 0),
            raw(0x06, 0, 0, 0, -4),
        ],
    );
    let e = assemble("goto nowhere\nexit", Some(Syntax::Llvm)).unwrap_err();
    assert_eq!((e.line, e.col), (1, 6));
    let e = assemble("a:\nexit\na:\nexit", None).unwrap_err();
    assert_eq!(e.line, 3);
}

#[test]
fn lddw_and_symbols() {
    check("r1 = 0 ll", &[raw(0x18, 1, 0, 0, 0), raw(0, 0, 0, 0, 0)]);
    check(
        "r1 = 0x1122334455667788 ll",
        &[raw(0x18, 1, 0, 0, 0x55667788), raw(0, 0, 0, 0, 0x11223344)],
    );
    check("r2 = -1 ll", &[raw(0x18, 2, 0, 0, -1), raw(0, 0, 0, 0, -1)]);
    check(
        "r1 = map_fd(3) ll",
        &[raw(0x18, 1, 1, 0, 3), raw(0, 0, 0, 0, 0)],
    );
    check(
        "r1 = map_value(3, 8) ll",
        &[raw(0x18, 1, 2, 0, 3), raw(0, 0, 0, 0, 8)],
    );
    let p = assemble_program("r1 = some_map ll\ncall 1\ncall helper_fn\nexit", None).unwrap();
    assert_eq!(
        encode_program(&p.insns),
        [
            raw(0x18, 1, 0, 0, 0),
            raw(0, 0, 0, 0, 0),
            raw(0x85, 0, 0, 0, 1),
            raw(0x85, 0, 1, 0, -1),
            raw(0x95, 0, 0, 0, 0),
        ]
    );
    assert_eq!(
        p.relocs,
        [
            SymbolRef {
                slot: 0,
                symbol: "some_map".into()
            },
            SymbolRef {
                slot: 3,
                symbol: "helper_fn".into()
            }
        ]
    );
    // Without relocations to carry them, undefined symbols are errors.
    let e = assemble("r1 = some_map ll\nexit", None).unwrap_err();
    assert_eq!((e.line, e.col), (1, 6));
    // A label as the value: the function's address (pseudo func).
    check(
        "r2 = cb ll\nexit\ncb:\nexit",
        &[
            raw(0x18, 2, 4, 0, 2),
            raw(0, 0, 0, 0, 0),
            raw(0x95, 0, 0, 0, 0),
            raw(0x95, 0, 0, 0, 0),
        ],
    );
}

#[test]
fn calls() {
    check("call 1", &[raw(0x85, 0, 0, 0, 1)]);
    check("call -1", &[raw(0x85, 0, 1, 0, -1)]);
    check("callx r2", &[raw(0x8d, 2, 0, 0, 0)]);
    check("call bpf_map_lookup_elem", &[raw(0x85, 0, 0, 0, 1)]);
    check("call kfunc 77", &[raw(0x85, 0, 2, 0, 77)]);
    check(
        "call f\nexit\nf:\nexit",
        &[
            raw(0x85, 0, 1, 0, 1),
            raw(0x95, 0, 0, 0, 0),
            raw(0x95, 0, 0, 0, 0),
        ],
    );
    check("exit", &[raw(0x95, 0, 0, 0, 0)]);
    // A label wins over a helper of the same name.
    check(
        "call redirect\nexit\nredirect:\nexit",
        &[
            raw(0x85, 0, 1, 0, 1),
            raw(0x95, 0, 0, 0, 0),
            raw(0x95, 0, 0, 0, 0),
        ],
    );
    check(
        "call redirect\nexit",
        &[raw(0x85, 0, 0, 0, 23), raw(0x95, 0, 0, 0, 0)],
    );
}

#[test]
fn atomics() {
    check("lock *(u64 *)(r0 + 0) += r1", &[raw(0xdb, 0, 1, 0, 0x00)]);
    check("lock *(u32 *)(r0 + 8) += w1", &[raw(0xc3, 0, 1, 8, 0x00)]);
    check("lock *(u64 *)(r1 + 0) |= r2", &[raw(0xdb, 1, 2, 0, 0x40)]);
    check("lock *(u64 *)(r1 + 0) &= r2", &[raw(0xdb, 1, 2, 0, 0x50)]);
    check("lock *(u64 *)(r1 - 8) ^= r2", &[raw(0xdb, 1, 2, -8, 0xa0)]);
    check(
        "r0 = atomic_fetch_add((u64 *)(r1 + 0), r0)",
        &[raw(0xdb, 1, 0, 0, 0x01)],
    );
    check(
        "w2 = atomic_fetch_and((u32 *)(r1 + 4), w2)",
        &[raw(0xc3, 1, 2, 4, 0x51)],
    );
    check(
        "r3 = atomic_fetch_or((u64 *)(r10 - 8), r3)",
        &[raw(0xdb, 10, 3, -8, 0x41)],
    );
    check(
        "r3 = atomic_fetch_xor((u64 *)(r10 - 8), r3)",
        &[raw(0xdb, 10, 3, -8, 0xa1)],
    );
    check("r0 = xchg_64(r1 + 0, r0)", &[raw(0xdb, 1, 0, 0, 0xe1)]);
    check("w3 = xchg32_32(r2 + 8, w3)", &[raw(0xc3, 2, 3, 8, 0xe1)]);
    check(
        "r0 = cmpxchg_64(r1 + 0, r0, r2)",
        &[raw(0xdb, 1, 2, 0, 0xf1)],
    );
    check(
        "w0 = cmpxchg32_32(r1 + 0, w0, w2)",
        &[raw(0xc3, 1, 2, 0, 0xf1)],
    );
    assert!(assemble("r1 = atomic_fetch_add((u64 *)(r1 + 0), r0)", None).is_err());
    assert!(assemble("r1 = cmpxchg_64(r1 + 0, r1, r2)", None).is_err());
}

#[test]
fn byte_swaps_and_address_space_cast() {
    check("r0 = bswap16 r0", &[raw(0xd7, 0, 0, 0, 16)]);
    check("r1 = bswap32 r1", &[raw(0xd7, 1, 0, 0, 32)]);
    check("r1 = bswap64 r1", &[raw(0xd7, 1, 0, 0, 64)]);
    check("r0 = be32 r0", &[raw(0xdc, 0, 0, 0, 32)]);
    check("r0 = be64 r0", &[raw(0xdc, 0, 0, 0, 64)]);
    check("r0 = le16 r0", &[raw(0xd4, 0, 0, 0, 16)]);
    check(
        "r1 = addr_space_cast(r2, 1, 0)",
        &[raw(0xbf, 1, 2, 1, 0x10000)],
    );
    assert!(assemble("r0 = be16 r1", None).is_err());
    assert!(assemble("r1 = addr_space_cast(r2, 0, 0)", None).is_err());
}

#[test]
fn comments_and_blank_lines() {
    check(
        "; leading comment\n\n  r0 = 0 # zero\n// another\nexit ; done",
        &[raw(0xb7, 0, 0, 0, 0), raw(0x95, 0, 0, 0, 0)],
    );
}

#[test]
fn conformance_forms() {
    let c = |t: &str| slots(t, Some(Syntax::Conformance));
    assert_eq!(c("call %r2"), [raw(0x8d, 2, 0, 0, 0)]);
    assert_eq!(c("mov32 %r0, 0xffffffff"), [raw(0xb4, 0, 0, 0, -1)]);
    assert_eq!(c("ldxsh %r0, [%r10-2]"), [raw(0x89, 0, 10, -2, 0)]);
    assert_eq!(
        c("lock fetch xor32 [%r10-4], %r3"),
        [raw(0xc3, 10, 3, -4, 0xa1)]
    );
    assert_eq!(c("movsx1632 %r4, %r3"), [raw(0xbc, 4, 3, 16, 0)]);
    assert_eq!(c("ja32 +5"), [raw(0x06, 0, 0, 0, 5)]);
    assert_eq!(c("swap16 %r0"), [raw(0xd7, 0, 0, 0, 16)]);
    assert_eq!(c("ldabsh 12"), [raw(0x28, 0, 0, 0, 12)]);
    assert_eq!(c("ldindb %r1, 4"), [raw(0x50, 0, 1, 0, 4)]);
    // `exit` as a jump target: the next exit instruction.
    assert_eq!(
        c("jeq %r1, 0xb, exit\nmov %r0, 2\nexit"),
        [
            raw(0x15, 1, 0, 1, 0xb),
            raw(0xb7, 0, 0, 0, 2),
            raw(0x95, 0, 0, 0, 0)
        ]
    );
}

#[test]
fn syntax_detection_and_mixing() {
    assert_eq!(
        asm::detect_syntax("exit\ncall 1\nr0 = 1"),
        Some(Syntax::Llvm)
    );
    assert_eq!(
        asm::detect_syntax("x:\nexit\nmov %r0, 1"),
        Some(Syntax::Conformance)
    );
    assert_eq!(asm::detect_syntax("exit\ncall 1"), None);
    // Undetermined text is read as llvm.
    assert_eq!(slots("call -1\nexit", None)[0], raw(0x85, 0, 1, 0, -1));
    let e = assemble("exit\nmov %r0, 1\nexit\nr0 = 1\nexit", None).unwrap_err();
    assert_eq!((e.line, e.col), (4, 1), "{e}");
    assert!(e.message.contains("line 2"), "{e}");
    let e = assemble("r0 = 1\n  lock add [%r10-8], %r1", None).unwrap_err();
    assert_eq!((e.line, e.col), (2, 3), "{e}");
    // With the syntax named, the other syntax is just a syntax error.
    assert!(assemble("mov %r0, 1", Some(Syntax::Llvm)).is_err());
    assert!(assemble("r0 = 1", Some(Syntax::Conformance)).is_err());
}

#[test]
fn error_display_has_line_and_column() {
    let e = assemble("r0 = 1\nr0 = *(u128 *)(r1 + 0)\nexit", None).unwrap_err();
    assert_eq!((e.line, e.col), (2, 8));
    assert!(e.to_string().starts_with("line 2:8: "), "{e}");
}
