//! `nfkit asm` and `nfkit disasm` run as a user runs them: files, hex
//! output, standard input, both syntaxes, ELF objects compiled here by
//! clang, and one-line errors with line:column and exit code 1.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .output()
        .expect("run nfkit")
}

fn nfkit_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nfkit");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "nfkit failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "nfkit-asm-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn file(&self, name: &str, contents: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p.display().to_string()
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const PROGRAM: &str = "\
; count down from 3, then return the helper's value
    r1 = 3
loop:
    r1 += -1
    if r1 != 0 goto loop
    r2 = 0x1122334455667788 ll
    *(u64 *)(r10 - 8) = r2
    r0 = atomic_fetch_add((u64 *)(r10 - 8), r0)
    call 5
    exit
";

#[test]
fn asm_to_file_then_disasm_round_trips_in_both_syntaxes() {
    let dir = TempDir::new();
    let src = dir.file("p.s", PROGRAM.as_bytes());
    let bin = dir.path("p.bin");
    stdout(&nfkit(&["asm", &src, "-o", &bin]));
    let bytes = std::fs::read(&bin).unwrap();
    assert_eq!(bytes.len(), 9 * 8); // lddw takes two slots
                                    // The first slot, by hand: ALU64|K|MOV, dst r1, imm 3.
    assert_eq!(&bytes[..8], &[0xb7, 0x01, 0, 0, 3, 0, 0, 0]);
    for syntax in ["llvm", "conformance"] {
        let text = stdout(&nfkit(&["disasm", &bin, "--syntax", syntax]));
        let again_src = dir.file(&format!("again-{syntax}.s"), text.as_bytes());
        let again = dir.path(&format!("again-{syntax}.bin"));
        stdout(&nfkit(&[
            "asm", &again_src, "-o", &again, "--syntax", syntax,
        ]));
        assert_eq!(std::fs::read(&again).unwrap(), bytes, "{syntax}:\n{text}");
    }
    let text = stdout(&nfkit(&["disasm", &bin]));
    assert!(text.contains("call 5 ; bpf_ktime_get_ns"), "{text}");
    assert!(text.contains("goto L1"), "jump label expected:\n{text}");
}

#[test]
fn asm_prints_hex_slots_and_reads_stdin() {
    let dir = TempDir::new();
    let src = dir.file("p.s", b"r0 = 1\nexit\n");
    let expected = "b700000001000000\n9500000000000000\n";
    assert_eq!(stdout(&nfkit(&["asm", &src])), expected);
    assert_eq!(
        stdout(&nfkit_stdin(&["asm", "-"], "r0 = 1\nexit\n")),
        expected
    );
    assert_eq!(
        stdout(&nfkit_stdin(
            &["asm", "-", "--syntax", "conformance"],
            "mov %r0, 1\nexit\n"
        )),
        expected
    );
    // Every line is one slot of 16 hex digits.
    let lines = stdout(&nfkit(&["asm", &dir.file("q.s", PROGRAM.as_bytes())]));
    assert_eq!(lines.lines().count(), 9);
    assert!(lines
        .lines()
        .all(|l| l.len() == 16 && l.bytes().all(|b| b.is_ascii_hexdigit())));
}

#[test]
fn asm_errors_give_file_line_column_and_exit_1() {
    let dir = TempDir::new();
    let src = dir.file("bad.s", b"r0 = 1\nr0 = *(u128 *)(r1 + 0)\nexit\n");
    let o = nfkit(&["asm", &src]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!("error: {src}:2:8: ")),
        "stderr: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Mixed syntaxes are refused at the first line of the other one.
    let o = nfkit_stdin(&["asm", "-"], "exit\nmov %r0, 1\nr0 = 2\n");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(":3:1: "), "stderr: {err}");
    // A syntax the text is not in.
    let o = nfkit(&["asm", &dir.file("c.s", b"mov %r0, 1\n"), "--syntax", "llvm"]);
    assert_eq!(o.status.code(), Some(1));
    // A missing file.
    let o = nfkit(&["asm", &dir.path("missing.s")]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn disasm_refuses_bad_raw_input() {
    let dir = TempDir::new();
    let o = nfkit(&["disasm", &dir.file("odd.bin", &[0x95, 0, 0, 0, 0, 0, 0])]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("multiple of 8"));
    // exit with a non-zero dst register: a reserved field.
    let o = nfkit(&["disasm", &dir.file("rsv.bin", &[0x95, 1, 0, 0, 0, 0, 0, 0])]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("instruction 0") && err.contains("dst"),
        "{err}"
    );
}

fn clang(dir: &TempDir, name: &str) -> String {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let out = dir.path(&format!("{name}.o"));
    nfkit_corpus::BpfBuild::new(corpus.join(format!("{name}.c")))
        .arg("-mcpu=v3")
        .include(&corpus)
        .out(&out)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    out
}

#[test]
fn disasm_of_an_object_prints_sections_functions_and_symbols() {
    let dir = TempDir::new();
    let obj = clang(&dir, "xdp_subprogs");
    let text = stdout(&nfkit(&["disasm", &obj]));
    let lines: Vec<&str> = text.lines().collect();
    for header in ["xdp:", ".text:", "xdp_classify:", "frame_class:", "bump:"] {
        assert!(lines.contains(&header), "no `{header}` in:\n{text}");
    }
    assert!(text.contains("r1 = counters ll"), "{text}");
    assert!(text.contains("call local frame_class"), "{text}");
    assert!(text.contains("; bpf_map_lookup_elem"), "{text}");

    // One section re-assembles to the object's own instructions.
    let object = nfkit_object::read_file(&obj).unwrap();
    for (section, syntax) in [("xdp", "llvm"), (".text", "conformance")] {
        let mut funcs: Vec<_> = object
            .functions
            .iter()
            .filter(|f| f.section == section)
            .collect();
        funcs.sort_by_key(|f| f.section_slot);
        let insns: Vec<_> = funcs.iter().flat_map(|f| f.insns.clone()).collect();
        let expected = nfkit_isa::encode_bytes(&insns);
        let text = stdout(&nfkit(&[
            "disasm",
            &obj,
            "--section",
            section,
            "--syntax",
            syntax,
        ]));
        let src = dir.file("sec.s", text.as_bytes());
        let bin = dir.path("sec.bin");
        stdout(&nfkit(&["asm", &src, "-o", &bin]));
        assert_eq!(std::fs::read(&bin).unwrap(), expected, "{section}:\n{text}");
    }

    // -S: source lines (from BTF line info) as comments, once per line.
    let text = stdout(&nfkit(&["disasm", &obj, "-S", "--section", "xdp"]));
    let comments: Vec<&str> = text.lines().filter(|l| l.starts_with("; ")).collect();
    assert!(
        comments.iter().any(|l| l.contains("xdp_subprogs.c:")),
        "{text}"
    );
    assert!(comments.windows(2).all(|w| w[0] != w[1]), "{text}");
    let p = nfkit_isa::assemble_program(&text, None).unwrap();
    assert_eq!(
        p.insns.len(),
        object
            .functions
            .iter()
            .filter(|f| f.section == "xdp")
            .map(|f| f.insns.len())
            .sum::<usize>()
    );

    let o = nfkit(&["disasm", &obj, "--section", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nope") && err.contains("xdp") && err.contains(".text"),
        "{err}"
    );
}

#[test]
fn disasm_of_a_damaged_object_is_an_error() {
    let dir = TempDir::new();
    let obj = clang(&dir, "xdp_subprogs");
    let mut bytes = std::fs::read(&obj).unwrap();
    bytes.truncate(100);
    let o = nfkit(&["disasm", &dir.file("cut.o", &bytes)]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}

/// One instruction as llvm-objdump prints it: text and bytes.
type Line = (String, Vec<u8>);

/// Sections of `llvm-objdump -d`: name → (text, bytes) per instruction.
fn objdump(obj: &str) -> Vec<(String, Vec<Line>)> {
    let out = Command::new("llvm-objdump")
        .args(["-d", obj])
        .output()
        .expect("run llvm-objdump");
    assert!(out.status.success());
    let mut sections: Vec<(String, Vec<Line>)> = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        if let Some(name) = line
            .strip_prefix("Disassembly of section ")
            .and_then(|s| s.strip_suffix(':'))
        {
            sections.push((name.to_string(), Vec::new()));
            continue;
        }
        let parts: Vec<&str> = line.split('\t').collect();
        if parts.len() < 3 || !parts[0].trim_end().ends_with(':') {
            continue;
        }
        let bytes: Vec<u8> = parts[1]
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        sections
            .last_mut()
            .unwrap()
            .1
            .push((parts[2].trim().to_string(), bytes));
    }
    sections
}

#[test]
fn corpus_agrees_with_llvm_objdump_in_both_directions() {
    let dir = TempDir::new();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let mut names: Vec<String> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert!(names.len() >= 12, "{names:?}");
    let (mut lines, mut sections) = (0, 0);
    for name in &names {
        let obj = clang(&dir, name);
        for (section, insns) in objdump(&obj) {
            // llvm-objdump's text, read by our llvm syntax, gives its bytes.
            for (text, bytes) in &insns {
                // ISA v4 instructions llvm-objdump 14 cannot print, and
                // local calls, which it prints as `call N` like helpers.
                let local_call = bytes.first() == Some(&0x85) && bytes.get(1) == Some(&0x10);
                if text.contains("<unknown>") || local_call {
                    continue;
                }
                let got = nfkit_isa::assemble_program(text, Some(nfkit_isa::Syntax::Llvm))
                    .unwrap_or_else(|e| panic!("{name} {section}: `{text}`: {e}"));
                assert_eq!(
                    &nfkit_isa::encode_bytes(&got.insns),
                    bytes,
                    "{name} {section}: `{text}`"
                );
                lines += 1;
            }
            // nfkit's disassembly of the section assembles to the same bytes.
            let expected: Vec<u8> = insns.iter().flat_map(|(_, b)| b.clone()).collect();
            for syntax in ["llvm", "conformance"] {
                let text = stdout(&nfkit(&[
                    "disasm",
                    &obj,
                    "--section",
                    &section,
                    "--syntax",
                    syntax,
                ]));
                let p = nfkit_isa::assemble_program(&text, None)
                    .unwrap_or_else(|e| panic!("{name} {section} {syntax}: {e}\n{text}"));
                assert_eq!(
                    nfkit_isa::encode_bytes(&p.insns),
                    expected,
                    "{name} {section} {syntax}:\n{text}"
                );
            }
            sections += 1;
        }
    }
    println!(
        "{} objects, {sections} sections, {lines} llvm-objdump lines",
        names.len()
    );
}
