//! Malformed objects are errors, never panics: truncation at every length,
//! random corruption (property tests), wrong machine, bad relocations and
//! bad BTF each give a one-line error naming where (section, symbol,
//! offset). Random bytes to the instruction decoder do not panic either.

use nfkit_object::{read_object, write_object, Image, ReadErrorKind};
use proptest::prelude::*;

const SAMPLE: &str = "xdp_subprogs";

fn sample() -> Vec<u8> {
    nfkit_corpus::get(SAMPLE).expect("sample").object.to_vec()
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A section header of the (well-formed) sample: (header offset, file
/// offset of the contents, size).
#[derive(Clone, Copy, Debug)]
struct Sh {
    header: usize,
    offset: usize,
    size: usize,
}

fn section(b: &[u8], name: &str) -> Sh {
    let shoff = u64_at(b, 0x28) as usize;
    let shnum = u16_at(b, 0x3c) as usize;
    let shstrndx = u16_at(b, 0x3e) as usize;
    let hdr = |i: usize| shoff + i * 64;
    let strtab = u64_at(b, hdr(shstrndx) + 24) as usize;
    for i in 0..shnum {
        let h = hdr(i);
        let n = strtab + u32_at(b, h) as usize;
        let end = n + b[n..].iter().position(|&c| c == 0).unwrap();
        if &b[n..end] == name.as_bytes() {
            return Sh {
                header: h,
                offset: u64_at(b, h + 24) as usize,
                size: u64_at(b, h + 32) as usize,
            };
        }
    }
    panic!("no section {name}");
}

/// Reads, links and writes; returns the first error as text. Panics propagate.
fn process(bytes: &[u8]) -> Result<(), String> {
    let obj = read_object(bytes, "t.o").map_err(|e| e.to_string())?;
    let img = Image::from_object(&obj).map_err(|e| e.to_string())?;
    let _ = nfkit_object::ObjectSummary::of(&obj);
    write_object(&img).map_err(|e| e.to_string())?;
    Ok(())
}

fn one_line(msg: &str) {
    assert!(
        !msg.is_empty() && !msg.contains('\n'),
        "not one line: {msg:?}"
    );
}

#[test]
fn truncated_at_every_length() {
    let b = sample();
    for n in 0..b.len() {
        let err = read_object(&b[..n], "t.o").expect_err(&format!("{n} bytes read"));
        let msg = err.to_string();
        one_line(&msg);
        if n >= 16 {
            assert!(
                msg.contains("offset 0x") || msg.contains("section '"),
                "{n} bytes: no location in {msg:?}"
            );
        }
    }
    assert!(read_object(&b, "t.o").is_ok());
}

#[test]
fn wrong_machine_and_type() {
    let mut b = sample();
    b[0x12] = 62; // EM_X86_64
    let err = read_object(&b, "t.o").unwrap_err();
    assert_eq!(err.kind, ReadErrorKind::WrongMachine(62));
    assert!(err.to_string().contains("machine 62"), "{err}");
    let mut b = sample();
    b[0x10] = 2; // ET_EXEC
    let err = read_object(&b, "t.o").unwrap_err();
    assert_eq!(err.kind, ReadErrorKind::NotRelocatable(2));
    let mut b = sample();
    b[4] = 1; // ELFCLASS32
    assert_eq!(
        read_object(&b, "t.o").unwrap_err().kind,
        ReadErrorKind::Not64Bit
    );
}

#[test]
fn relocation_offset_out_of_range() {
    let mut b = sample();
    let rel = section(&b, ".relxdp");
    b[rel.offset..rel.offset + 8].copy_from_slice(&0xfff0u64.to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    one_line(&msg);
    assert!(
        msg.contains("section 'xdp'") && msg.contains("offset 0xfff0") && msg.contains("symbol '"),
        "{msg}"
    );
    // Not on an instruction boundary.
    let mut b = sample();
    let r_off = u64_at(&b, rel.offset);
    b[rel.offset..rel.offset + 8].copy_from_slice(&(r_off + 3).to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    assert!(msg.contains("not on an instruction"), "{msg}");
}

#[test]
fn relocation_symbol_index_out_of_range() {
    let mut b = sample();
    let rel = section(&b, ".relxdp");
    let info = u64_at(&b, rel.offset + 8);
    let bad = (9999u64 << 32) | (info & 0xffff_ffff);
    b[rel.offset + 8..rel.offset + 16].copy_from_slice(&bad.to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    one_line(&msg);
    assert!(
        msg.contains("section 'xdp'") && msg.contains("symbol index 9999"),
        "{msg}"
    );
}

#[test]
fn relocation_of_unknown_type() {
    let mut b = sample();
    let rel = section(&b, ".relxdp");
    let info = u64_at(&b, rel.offset + 8);
    let bad = (info & !0xffff_ffff) | 77;
    b[rel.offset + 8..rel.offset + 16].copy_from_slice(&bad.to_le_bytes());
    let err = read_object(&b, "t.o").unwrap_err();
    assert_eq!(err.kind, ReadErrorKind::RelocationType(77));
    assert!(err.to_string().contains("section 'xdp'"), "{err}");
}

#[test]
fn btf_truncated() {
    let mut b = sample();
    let btf = section(&b, ".BTF");
    for size in [0u64, 3, 23, 30, (btf.size / 2) as u64] {
        b[btf.header + 32..btf.header + 40].copy_from_slice(&size.to_le_bytes());
        let err = read_object(&b, "t.o").unwrap_err();
        let msg = err.to_string();
        one_line(&msg);
        // Either the BTF itself or its relocations (which now point past it).
        assert!(
            msg.contains("section '.BTF'")
                && matches!(
                    err.kind,
                    ReadErrorKind::Btf(_) | ReadErrorKind::BadRelocation(_)
                ),
            "{size}: {msg}"
        );
    }
}

#[test]
fn btf_bad_type_id() {
    let mut b = sample();
    let btf = section(&b, ".BTF");
    let hdr_len = u32_at(&b, btf.offset + 4) as usize;
    let type_off = u32_at(&b, btf.offset + 8) as usize;
    let first = btf.offset + hdr_len + type_off;
    // Type 1 of clang's output here is `struct xdp_md *` (PTR: name, info, type).
    assert_eq!(u32_at(&b, first + 4) >> 24 & 0x1f, 2, "type 1 is not a PTR");
    b[first + 8..first + 12].copy_from_slice(&0xffffu32.to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    one_line(&msg);
    assert!(
        msg.contains("section '.BTF'") && msg.contains("65535"),
        "{msg}"
    );
    // An unknown kind.
    let mut b = sample();
    let info = u32_at(&b, first + 4);
    b[first + 4..first + 8].copy_from_slice(&((info & !(0x1f << 24)) | (30 << 24)).to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    assert!(msg.contains("unknown kind 30"), "{msg}");
}

#[test]
fn btf_ext_bad_func_info() {
    let mut b = sample();
    let ext = section(&b, ".BTF.ext");
    let hdr_len = u32_at(&b, ext.offset + 4) as usize;
    let func_off = u32_at(&b, ext.offset + 8) as usize;
    // rec_size, then section name, count, records {insn_off, type_id}.
    let rec = ext.offset + hdr_len + func_off + 12;
    b[rec + 4..rec + 8].copy_from_slice(&0x7777u32.to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    one_line(&msg);
    assert!(msg.contains("func_info") || msg.contains("30583"), "{msg}");
}

#[test]
fn sections_outside_the_file() {
    let mut b = sample();
    let text = section(&b, ".text");
    b[text.header + 24..text.header + 32].copy_from_slice(&0xffff_ffffu64.to_le_bytes());
    let msg = read_object(&b, "t.o").unwrap_err().to_string();
    one_line(&msg);
    assert!(msg.contains("section '.text'"), "{msg}");
}

/// The ranges of the sample worth corrupting most: code, relocations,
/// symbols, maps, BTF.
fn hot_ranges() -> Vec<(usize, usize)> {
    let b = sample();
    [
        ".text",
        "xdp",
        ".relxdp",
        ".rel.text",
        ".maps",
        ".BTF",
        ".BTF.ext",
        ".symtab",
    ]
    .iter()
    .map(|n| section(&b, n))
    .map(|s| (s.offset, s.size.max(1)))
    .collect()
}

fn fuzz_cases() -> u32 {
    std::env::var("NFKIT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

proptest! {
    // NFKIT_FUZZ_CASES=100000 for a longer soak.
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Anywhere in the file.
    #[test]
    fn corrupted_anywhere_never_panics(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut b = sample();
        let len = b.len();
        for (i, v) in edits {
            b[i.index(len)] = v;
        }
        if let Err(msg) = process(&b) {
            one_line(&msg);
        }
    }

    /// Inside the sections the reader interprets most.
    #[test]
    fn corrupted_sections_never_panic(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let ranges = hot_ranges();
        let (start, size) = ranges[which.index(ranges.len())];
        let mut b = sample();
        for (i, v) in edits {
            b[start + i.index(size)] = v;
        }
        if let Err(msg) = process(&b) {
            one_line(&msg);
        }
    }

    /// Random bytes to the instruction decoder.
    #[test]
    fn random_bytes_to_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        match nfkit_isa::decode_bytes(&bytes) {
            Ok(insns) => {
                // What decodes, encodes back to the same bytes.
                prop_assert_eq!(nfkit_isa::encode_bytes(&insns), bytes);
            }
            Err(e) => one_line(&e.to_string()),
        }
    }

    /// Random 8-byte slots with valid-looking opcodes.
    #[test]
    fn random_slots_to_the_decoder(words in prop::collection::vec(any::<u64>(), 1..32)) {
        let raw: Vec<nfkit_isa::RawInsn> = words.iter().map(|&w| nfkit_isa::RawInsn::from_u64(w)).collect();
        match nfkit_isa::decode_program(&raw) {
            Ok(insns) => prop_assert_eq!(nfkit_isa::encode_program(&insns), raw),
            Err(e) => {
                one_line(&e.to_string());
                prop_assert!(e.index < raw.len());
            }
        }
    }
}
