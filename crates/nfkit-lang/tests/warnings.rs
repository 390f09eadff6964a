//! The checker's warnings that are not about loops (implicit narrowing of
//! a call result, comparisons decided by a type's range): golden files
//! `tests/warnings/<name>.py` give `tests/warnings/<name>.expected`, as
//! `nfkit check` prints them; NFKIT_BLESS=1 rewrites the expected files.
//! Every script compiles and warns. A comparison with a literal out of
//! the operand's range keeps its (constant) value at run time (checked in
//! the VM by nfkit-control's tests/vm.rs).

use nfkit_lang::{check, diag, Options};
use std::path::Path;

#[test]
fn golden_warnings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/warnings");
    let bless = std::env::var_os("NFKIT_BLESS").is_some();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/warnings")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".py"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 3, "only {} golden files", names.len());
    let mut failures = Vec::new();
    for n in &names {
        let src = std::fs::read_to_string(dir.join(format!("{n}.py"))).expect("source");
        let file = format!("{n}.py");
        let got = match check::check(&file, &src, &Options::default()) {
            Ok(c) => diag::render(&c.warnings),
            Err(e) => panic!("{n} does not compile:\n{e}"),
        };
        assert!(got.contains(": warning: "), "{n}: no warning");
        assert!(got.contains("^\n  help: "), "{n}: {got}");
        let exp_path = dir.join(format!("{n}.expected"));
        if bless {
            std::fs::write(&exp_path, &got).expect("write expected");
            continue;
        }
        let want = std::fs::read_to_string(&exp_path).unwrap_or_default();
        if got != want {
            failures.push(format!("--- {n}: expected\n{want}--- got\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
