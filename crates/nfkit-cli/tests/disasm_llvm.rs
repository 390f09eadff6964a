//! `nfkit disasm` against `llvm-objdump -d` on every executable section
//! of every object built here with clang (`-O2 -g -target bpf
//! -mcpu=v3`): the C corpus (`corpus/*.c`), the hand-written examples
//! (`examples/c/*.c`), the NF catalogue (`nf/*.c`), the test programs of
//! `crates/*/tests/progs/*.c` and the programs of `tests/disasm_progs/`
//! (odd sections: `sk_lookup/...`, `fexit/`, `lsm/`, `struct_ops/`,
//! `.text` only, several programs per section, local calls, map values,
//! atomics, externs and kfuncs, CO-RE, maps of maps, ...). Every object is
//! shown with exit 0 by `nfkit disasm` and `nfkit object show` (text and
//! JSON), and per section both tools agree on the instruction count and,
//! instruction by instruction, on the mnemonic: the text with registers,
//! numbers, symbols and jump targets made generic. Every relocated
//! instruction (`llvm-objdump -r`) names its symbol, or carries an
//! `unsupported` note.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"))
}

/// `*.c` of `dir`, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    v.sort();
    v
}

/// A C file to build: its path, include directories, and the NF hook it
/// is built for (`-DNF_HOOK_<HOOK>`; NF modules once per `@hooks` entry).
struct Source {
    path: PathBuf,
    include: Vec<PathBuf>,
    hook: Option<String>,
}

/// The hooks an NF module declares (`@hooks xdp tc socket`).
fn hooks(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read NF source");
    text.lines()
        .find_map(|l| l.split_once("@hooks").map(|(_, h)| h.to_string()))
        .map(|h| h.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Every source to build.
/// Every source to build; `gen` holds generated headers (`vmlinux.h`).
fn all_sources(gen: &Path) -> Vec<Source> {
    let r = root();
    let mut out = Vec::new();
    for (dir, inc) in [
        ("corpus", vec!["corpus"]),
        ("examples/c", vec!["examples/c", "corpus"]),
        ("nf", vec!["nf/include"]),
        ("crates/nfkit-cli/tests/disasm_progs", vec![]),
    ] {
        let include: Vec<PathBuf> = inc.iter().map(|i| r.join(i)).collect();
        for path in sources(&r.join(dir)) {
            let hooks = if dir == "nf" {
                hooks(&path)
            } else {
                Vec::new()
            };
            if hooks.is_empty() {
                out.push(Source {
                    path,
                    include: include.clone(),
                    hook: None,
                });
            } else {
                for h in hooks {
                    out.push(Source {
                        path: path.clone(),
                        include: include.clone(),
                        hook: Some(h),
                    });
                }
            }
        }
    }
    for c in std::fs::read_dir(r.join("crates"))
        .expect("crates")
        .flatten()
    {
        let progs = c.path().join("tests/progs");
        if progs.is_dir() {
            for path in sources(&progs) {
                let include = vec![
                    progs.clone(),
                    r.join("corpus"),
                    gen.to_path_buf(),
                    r.join("nf/include"),
                    r.join("nf"),
                ];
                // Programs built on the NF header (nfkit-dpi's probe) are
                // built per hook, as their tests build them.
                let nf_header = std::fs::read_to_string(&path)
                    .is_ok_and(|t| t.contains("#include \"nfkit.h\""));
                let hooks: Vec<Option<String>> = if nf_header {
                    vec![Some("xdp".into()), Some("tc".into())]
                } else {
                    vec![None]
                };
                for hook in hooks {
                    out.push(Source {
                        path: path.clone(),
                        include: include.clone(),
                        hook,
                    });
                }
            }
        }
    }
    out
}

/// Compiles `src` into `out`; the object's path.
fn compile(src: &Source, out: &Path) -> PathBuf {
    let path = &src.path;
    let parent = path.parent().and_then(Path::file_name).unwrap_or_default();
    let name = format!(
        "{}-{}{}.o",
        parent.to_string_lossy(),
        path.file_stem().unwrap_or_default().to_string_lossy(),
        src.hook
            .as_ref()
            .map(|h| format!(".{h}"))
            .unwrap_or_default()
    );
    let obj = out.join(name);
    let mut build = nfkit_corpus::BpfBuild::new(path).arg("-mcpu=v3");
    for i in &src.include {
        build = build.include(i);
    }
    if let Some(h) = &src.hook {
        build = build.define(format!("NF_HOOK_{}", h.to_uppercase()));
    }
    build
        .out(obj)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Identifiers that are part of an instruction's mnemonic; any other
/// identifier is an operand (a symbol where llvm-objdump prints 0).
const WORDS: &[&str] = &[
    "ll", "lock", "if", "goto", "call", "exit", "u8", "u16", "u32", "u64", "s8", "s16", "s32",
    "s64", "be16", "be32", "be64", "le16", "le32", "le64", "bswap16", "bswap32", "bswap64", "skb",
];

/// An instruction's mnemonic: its text with registers (`r`, `w`),
/// numbers and symbols (`N`) made generic, jump targets and call operands
/// dropped, and function-like operators (`atomic_fetch_add(`,
/// `xchg_64(`, ...) kept.
fn mnemonic(text: &str) -> String {
    let text = text.split(" ; ").next().unwrap_or(text);
    let text = text.split(" <").next().unwrap_or(text).trim();
    if text.starts_with("call") {
        return "call".into();
    }
    let text = match text.find("goto") {
        Some(i) => &text[..i + 4],
        None => text,
    };
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let w: String = chars[start..i].iter().collect();
            let reg = |p: char| {
                w.strip_prefix(p)
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            };
            let next = chars.get(i).copied();
            out.push_str(if reg('r') {
                "r"
            } else if reg('w') {
                "w"
            } else if WORDS.contains(&w.as_str()) || next == Some('(') {
                &w
            } else {
                "N"
            });
        } else if c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
            i += 1; // a negative number: its sign is part of the operand
        } else {
            if !c.is_whitespace() {
                out.push(c);
            }
            i += 1;
        }
    }
    // A plain load or store of under 8 bytes: llvm-objdump with
    // `+alu32` names its register `w`, without it `r` (nfkit's choice).
    if out.contains("*(u") && !out.contains("lock") && !out.contains("(r+N,") {
        out = out.replace('w', "r");
    }
    out
}

/// One instruction as llvm-objdump shows it: its slot and text.
type LlvmInsn = (u64, String);

/// llvm-objdump's relocations of code section `section`: (byte offset,
/// symbol).
fn llvm_relocations(obj: &Path, section: &str) -> Vec<(u64, String)> {
    let o = run("llvm-objdump", &["-r", obj.to_str().expect("path")]);
    assert!(o.status.success(), "llvm-objdump -r {}", obj.display());
    let mut out = Vec::new();
    let mut inside = false;
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if let Some(s) = l.strip_prefix("RELOCATION RECORDS FOR [") {
            inside = s.trim_end_matches("]:") == section;
            continue;
        }
        let mut f = l.split_whitespace();
        if let (true, Some(off), Some(_), Some(sym)) = (inside, f.next(), f.next(), f.next()) {
            if let Ok(off) = u64::from_str_radix(off, 16) {
                out.push((off, sym.to_string()));
            }
        }
    }
    out
}

/// llvm-objdump's instructions per section, in order.
fn llvm_sections(obj: &Path) -> Vec<(String, Vec<LlvmInsn>)> {
    let o = run(
        "llvm-objdump",
        &[
            "-d",
            "--no-show-raw-insn",
            "--mattr=+alu32",
            obj.to_str().expect("path"),
        ],
    );
    assert!(o.status.success(), "llvm-objdump {}", obj.display());
    let mut out: Vec<(String, Vec<LlvmInsn>)> = Vec::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if let Some(s) = l.strip_prefix("Disassembly of section ") {
            out.push((s.trim_end_matches(':').to_string(), Vec::new()));
        } else if let Some((idx, text)) = l.split_once(":\t") {
            if let (Ok(slot), Some((_, v))) = (idx.trim().parse::<u64>(), out.last_mut()) {
                v.push((slot, text.trim().to_string()));
            }
        }
    }
    out
}

/// One instruction as nfkit shows it: its text, and whether an
/// `unsupported` note stands before it.
struct Shown {
    text: String,
    noted: bool,
}

/// `nfkit disasm --section` of `section`: its instructions.
fn nfkit_section(obj: &Path, section: &str) -> Result<Vec<Shown>, String> {
    let o = run(
        env!("CARGO_BIN_EXE_nfkit"),
        &["disasm", obj.to_str().expect("path"), "--section", section],
    );
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    let mut out = Vec::new();
    let mut noted = false;
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if l.starts_with("; unsupported") {
            noted = true;
        } else if l.starts_with("    ") {
            out.push(Shown {
                text: l.trim().to_string(),
                noted,
            });
            noted = false;
        }
    }
    Ok(out)
}

/// Whether instruction `text` names a symbol (as an operand, or in its
/// trailing comment): an identifier that is no register and no part of
/// the mnemonic.
fn names_a_symbol(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '.'))
        .any(|w| {
            let reg = |p: char| {
                w.strip_prefix(p)
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            };
            !reg('r') && !reg('w') && !WORDS.contains(&w) && w != "local"
        })
}

/// What is wrong with the relocated instructions of `section`: each must
/// name its symbol (a section symbol: any symbol, such as the variable
/// at that offset) or carry a note.
fn check_relocations(obj: &Path, section: &str, llvm: &[LlvmInsn], got: &[Shown]) -> Vec<String> {
    let mut bad = Vec::new();
    for (off, sym) in llvm_relocations(obj, section) {
        let Some(k) = llvm.iter().position(|(slot, _)| *slot * 8 == off) else {
            bad.push(format!("{section}: relocation at {off} on no instruction"));
            continue;
        };
        let Some(g) = got.get(k) else { continue };
        let named = if sym.starts_with('.') {
            names_a_symbol(&g.text)
        } else {
            g.text.contains(&sym)
        };
        if !named && !g.noted {
            bad.push(format!("{section}+{off}: `{}` names no `{sym}`", g.text));
        }
    }
    bad
}

/// What is wrong with `obj` (empty: nfkit shows it and agrees with llvm).
fn check_object(obj: &Path, sections: &mut usize) -> Vec<String> {
    let path = obj.to_str().expect("path");
    let mut bad = Vec::new();
    for args in [
        vec!["disasm", path],
        vec!["object", "show", path],
        vec!["object", "show", path, "--json"],
    ] {
        let o = run(env!("CARGO_BIN_EXE_nfkit"), &args);
        if !o.status.success() || o.stdout.is_empty() {
            bad.push(format!(
                "{args:?}: exit {:?}: {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    for (section, want) in llvm_sections(obj) {
        *sections += 1;
        let got = match nfkit_section(obj, &section) {
            Ok(g) => g,
            Err(e) => {
                bad.push(format!("{section}: {e}"));
                continue;
            }
        };
        if got.len() != want.len() {
            bad.push(format!(
                "{section}: {} instructions, llvm-objdump {}",
                got.len(),
                want.len()
            ));
            continue;
        }
        for (k, (g, (_, w))) in got.iter().zip(&want).enumerate() {
            if mnemonic(&g.text) != mnemonic(w) {
                bad.push(format!("{section} #{k}: `{}` vs llvm `{w}`", g.text));
                break;
            }
        }
        bad.extend(check_relocations(obj, &section, &want, &got));
    }
    bad
}

#[test]
fn mnemonics_are_generic() {
    assert_eq!(mnemonic("r1 = *(u32 *)(r10 - 4)"), "r=*(u32*)(r-N)");
    assert_eq!(mnemonic("r1 = counts ll"), mnemonic("r1 = 0 ll"));
    assert_eq!(
        mnemonic("if w6 == 10 goto L10"),
        mnemonic("if w6 == 10 goto +2 <LBB0_2>")
    );
    assert_eq!(
        mnemonic("call 1 ; bpf_map_lookup_elem"),
        mnemonic("call -1")
    );
    assert_ne!(mnemonic("w0 += w1"), mnemonic("r0 += r1"));
    assert_eq!(
        mnemonic("r1 = *(u32 *)(r6 + 16)"),
        mnemonic("w1 = *(u32 *)(r6 + 16)")
    );
    assert_ne!(
        mnemonic("r1 = *(u32 *)(r6 + 16)"),
        mnemonic("r1 = *(u16 *)(r6 + 16)")
    );
    assert_ne!(mnemonic("r0 = xchg_64(r2 + 0, r5)"), mnemonic("r0 = r5"));
    assert_ne!(
        mnemonic("lock *(u32 *)(r4 + 0) &= w3"),
        mnemonic("lock *(u32 *)(r4 + 0) |= w3")
    );
}

#[test]
fn symbols_are_told_apart_from_registers_and_mnemonics() {
    assert!(names_a_symbol("r1 = counts ll"));
    assert!(names_a_symbol("call local bpf_task_acquire"));
    assert!(!names_a_symbol("r1 = 0 ll"));
    assert!(names_a_symbol("call local +2 ; sub_20"));
    assert!(names_a_symbol("r1 = 64 ll ; .rodata+64"));
    assert!(!names_a_symbol("call local +2"));
    assert!(!names_a_symbol("r1 = *(u32 *)(r10 - 4)"));
}

#[test]
fn every_section_of_every_object_agrees_with_llvm_objdump() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("disasm_llvm-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("tmp dir");
    nfkit_corpus::vmlinux_h(&out).unwrap_or_else(|e| panic!("{e}"));
    let objects: Vec<PathBuf> = all_sources(&out).iter().map(|s| compile(s, &out)).collect();
    let (mut sections, mut failures) = (0, Vec::new());
    for o in &objects {
        for b in check_object(o, &mut sections) {
            failures.push(format!("{}: {b}", o.display()));
        }
    }
    println!(
        "{} objects, {sections} executable sections, {} disagreements",
        objects.len(),
        failures.len()
    );
    let _ = std::fs::remove_dir_all(&out);
    assert!(objects.len() >= 50, "{} objects", objects.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
