//! `nfkit disasm` and `nfkit object show` on objects with parts nfkit
//! cannot load or run (programs of `tests/disasm_progs/`, built here with
//! clang): the whole object is shown with exit 0, and each unsupported
//! part is a note naming what it touches (in text beside the instruction,
//! and in `--json`), while reading for loading and running still refuses
//! those parts as before. Objects of bare `.text` functions, and call
//! targets without symbols, as the reader takes them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .output()
        .expect("run nfkit")
}

/// `tests/disasm_progs/<name>.c` built into a per-test directory.
fn build(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/disasm_progs/{name}.c"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("object_notes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let obj = dir.join(format!("{name}.o"));
    nfkit_corpus::BpfBuild::new(src)
        .arg("-mcpu=v3")
        .out(&obj)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    obj
}

/// `nfkit disasm` and `nfkit object show --json` of `obj`, both exit 0.
fn shown(obj: &Path) -> (String, Value) {
    let p = obj.to_str().expect("path");
    let d = nfkit(&["disasm", p]);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let t = nfkit(&["object", "show", p]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let j = nfkit(&["object", "show", p, "--json"]);
    assert!(j.status.success(), "{}", String::from_utf8_lossy(&j.stderr));
    let v: Value = serde_json::from_slice(&j.stdout).expect("JSON");
    (String::from_utf8_lossy(&d.stdout).into_owned(), v)
}

/// The JSON note on `symbol` (or on `section` when no symbol is given).
fn note<'a>(v: &'a Value, section: &str, symbol: Option<&str>) -> &'a Value {
    v["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .find(|n| n["section"] == section && symbol.is_none_or(|s| n["symbol"] == s))
        .unwrap_or_else(|| panic!("no note on {section} {symbol:?} in {v}"))
}

/// The instruction after the note comment containing `needle` in `text`
/// (labels and other comments between skipped).
fn line_after<'a>(text: &'a str, needle: &str) -> &'a str {
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.starts_with(';') && l.contains(needle) {
            return lines.find(|l| l.starts_with("    ")).unwrap_or("");
        }
    }
    panic!("no note with `{needle}` in\n{text}")
}

#[test]
fn kfuncs_and_externs_are_noted_beside_their_instructions() {
    let obj = build("externs");
    let (text, v) = shown(&obj);
    let n = note(&v, "tp_btf/sched_switch", Some("bpf_task_acquire"));
    assert!(
        n["what"]
            .as_str()
            .unwrap()
            .contains("kernel function 'bpf_task_acquire'"),
        "{n}"
    );
    assert_eq!(n["offset"], 16);
    assert_eq!(
        line_after(&text, "kernel function 'bpf_task_acquire'").trim(),
        "call local bpf_task_acquire"
    );
    let n = note(&v, "tp_btf/sched_switch", Some("LINUX_KERNEL_VERSION"));
    assert!(n["what"].as_str().unwrap().contains("extern"), "{n}");
    assert!(line_after(&text, "LINUX_KERNEL_VERSION").ends_with(" ll"));
    assert_eq!(v["programs"][0]["name"], "externs");
    // Loading still refuses it (the kconfig extern first; a kfunc call
    // alone is refused by the linker, naming it: tests/run.rs).
    let e = nfkit_object::Image::from_file(&obj)
        .unwrap_err()
        .to_string();
    assert!(e.contains("extern 'LINUX_KERNEL_VERSION'"), "{e}");
}

#[test]
fn co_re_unknown_sections_and_struct_ops_are_noted() {
    let (_, v) = shown(&build("odd_tracing"));
    // CO-RE relocations are supported: listed with their values, not noted.
    let core = v["core_relos"].as_array().expect("core_relos");
    assert!(!core.is_empty(), "{v}");
    assert!(core
        .iter()
        .all(|c| c["note"].as_str().unwrap().starts_with("CO-RE")));
    let names: Vec<&str> = v["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["section"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fexit/do_unlinkat",
            "fentry/do_unlinkat",
            "lsm/file_open",
            "kprobe/do_sys_openat2",
            "tracepoint/syscalls/sys_enter_openat"
        ]
    );
    let strict = std::fs::read(build("odd_tracing")).unwrap();
    if let Err(e) = nfkit_object::read_object(&strict, "odd_tracing.o") {
        assert!(!e.to_string().contains("CO-RE"), "{e}");
    }

    let obj = build("odd_sk_lookup");
    let (text, v) = shown(&obj);
    let n = note(&v, "sk_lookup/second", None);
    assert!(
        n["what"]
            .as_str()
            .unwrap()
            .contains("unknown program section"),
        "{n}"
    );
    assert!(
        text.contains("sk_lookup/second:\n; unsupported: unknown program section"),
        "{text}"
    );
    let p = &v["programs"].as_array().unwrap()[1];
    assert_eq!(
        (&p["name"], &p["type"]),
        (&"lookup2".into(), &"unspec".into())
    );
    let e = nfkit_object::Image::from_file(&obj)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown program section 'sk_lookup/second'"),
        "{e}"
    );

    let (_, v) = shown(&build("odd_struct_ops"));
    assert!(note(&v, ".struct_ops", None)["what"]
        .as_str()
        .unwrap()
        .contains("struct_ops"));
    assert_eq!(v["programs"].as_array().unwrap().len(), 2);
}

#[test]
fn maps_nfkit_cannot_read_are_noted_and_the_others_shown() {
    let (text, v) = shown(&build("maps_of_maps"));
    let maps: Vec<&str> = v["maps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(maps.contains(&"inner_a"), "{v}");
    for m in ["outer_arr", "outer_hash"] {
        if !maps.contains(&m) {
            // Until maps of maps are read, each is a note.
            assert!(note(&v, ".maps", Some(m))["what"]
                .as_str()
                .unwrap()
                .contains("map"));
            assert!(text.contains(&format!("unsupported ({m})")), "{text}");
        }
    }
}

#[test]
fn text_objects_and_unsymbolled_calls() {
    // Bare `.text` functions: the global ones are programs.
    let obj = build("text_only");
    let (_, v) = shown(&obj);
    let progs: Vec<&str> = v["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(progs, ["entry_one", "entry_two"]);
    assert_eq!(v["functions"][0]["name"], "twice");
    let image = nfkit_object::Image::from_file(&obj).expect("links");
    assert_eq!(image.entries.len(), 2);
    // Linked with an object that has program sections, they are not
    // entries.
    let a = nfkit_object::read_file(&obj).unwrap();
    let b = nfkit_object::read_file(build("multi_per_section")).unwrap();
    let both = nfkit_object::link(&[b, a]).expect("links");
    assert!(
        both.entries.iter().all(|e| e.section != ".text"),
        "{:?}",
        both.entries
    );
    assert_eq!(both.entries.len(), 5);

    // A call to an inline-assembly label no symbol names.
    let (text, v) = shown(&build("text_and_asm"));
    assert!(text.contains("call local +2 ; sub_20\n"), "{text}");
    assert!(text.contains("\nsub_20:\n"), "{text}");
    assert_eq!(v["functions"][0]["name"], "sub_20");
    assert_eq!(v["functions"][0]["binding"], "static");
    assert!(v["notes"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn broken_files_are_still_errors() {
    let good = std::fs::read(build("atomics")).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("object_notes-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("truncated.o");
    std::fs::write(&p, &good[..good.len() / 2]).unwrap();
    for args in [vec!["disasm"], vec!["object", "show"]] {
        let o = nfkit(&[&args[..], &[p.to_str().unwrap()]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(o.stdout.is_empty());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("truncated.o"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
