//! The bpf_conformance suite through the assembler and disassembler: every
//! `-- asm` section assembles (and matches the `-- raw` words where the
//! file has them); disassembling in each syntax and assembling again gives
//! the same bytes; every negative file's assembly text is refused.

use nfkit_isa::*;
use std::fs;
use std::path::{Path, PathBuf};

const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/bpf_conformance"
);

/// Sections of a `.data` file: name → text. A `-- name` line starts a
/// section; any other line belongs to the current one.
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            out.push((name.trim().to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

fn section<'a>(s: &'a [(String, String)], name: &str) -> Option<&'a str> {
    s.iter().find(|(n, _)| n == name).map(|(_, b)| b.as_str())
}

fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    v.sort();
    v
}

/// `0x...` words (the `-- raw` form) into bytes.
fn raw_words(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix("0x"))
        .flat_map(|h| u64::from_str_radix(h, 16).unwrap().to_le_bytes())
        .collect()
}

#[test]
fn every_asm_section_assembles_and_round_trips_in_both_syntaxes() {
    let files = data_files(&Path::new(SUITE).join("tests"));
    let mut count = 0;
    let mut raw_checked = 0;
    for path in &files {
        let text = fs::read_to_string(path).unwrap();
        let secs = sections(&text);
        let Some(asm) = section(&secs, "asm") else {
            continue;
        };
        let name = path.file_name().unwrap().to_string_lossy();
        let insns = assemble(asm, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let explicit = assemble(asm, Some(Syntax::Conformance)).unwrap();
        assert_eq!(insns, explicit, "{name}: detection picked another syntax");
        let bytes = encode_bytes(&insns);
        assert_eq!(decode_bytes(&bytes).unwrap(), insns, "{name}");
        if let Some(raw) = section(&secs, "raw") {
            assert_eq!(
                bytes,
                raw_words(raw),
                "{name}: differs from its -- raw words"
            );
            raw_checked += 1;
        }
        for syntax in [Syntax::Llvm, Syntax::Conformance] {
            for labels in [true, false] {
                let opts = DisasmOptions {
                    syntax,
                    labels,
                    ..Default::default()
                };
                let text = disassemble(&insns, &opts);
                let again = assemble(&text, Some(syntax))
                    .unwrap_or_else(|e| panic!("{name} ({syntax:?}): {e}\n{text}"));
                assert_eq!(encode_bytes(&again), bytes, "{name} ({syntax:?}):\n{text}");
                let detected = assemble(&text, None).unwrap();
                assert_eq!(
                    encode_bytes(&detected),
                    bytes,
                    "{name} ({syntax:?}, detected)"
                );
            }
        }
        count += 1;
    }
    println!("conformance asm sections assembled and round-tripped: {count}");
    assert_eq!(count, 313);
    assert_eq!(raw_checked, 1);
}

#[test]
fn every_negative_assembly_text_is_rejected() {
    let files = data_files(&Path::new(SUITE).join("negative"));
    let mut rejected = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = fs::read_to_string(path).unwrap();
        let secs = sections(&text);
        if section(&secs, "raw").is_some() {
            continue; // unused-*: raw encodings, the decoder's business (codec.rs)
        }
        // Files without an asm section (empty.data, empty_instructions.data)
        // have an empty program.
        let asm = section(&secs, "asm").unwrap_or("");
        // invalid_unknown_directive.data: the `-- Unknown directive` line
        // is part of the assembly text, not a section of ours.
        let asm = if name == "invalid_unknown_directive.data" {
            let start = text.find("-- asm\n").unwrap() + "-- asm\n".len();
            let end = text.find("-- error").unwrap();
            &text[start..end]
        } else {
            asm
        };
        let result = assemble(asm, None);
        if name == "incorrect_return_value_high_bits.data" {
            assert!(result.is_ok(), "{name}: valid assembly refused: {result:?}");
            continue;
        }
        let err = result.expect_err(&name);
        assert!(err.line >= 1 && err.col >= 1, "{name}: {err}");
        if let Some(expected) = section(&secs, "error") {
            let expected = expected.trim();
            if name != "invalid_unknown_directive.data" {
                assert!(
                    err.message.contains(expected),
                    "{name}: `{err}` does not contain `{expected}`"
                );
            }
        }
        println!("{name}: {err}");
        rejected += 1;
    }
    println!("negative assembly texts rejected: {rejected}");
    assert_eq!(rejected, 14);
}
