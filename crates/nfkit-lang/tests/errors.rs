//! Golden files: every error kind (and the warnings) of the checker, as
//! `nfkit check` prints them. `tests/errors/<name>.py` gives
//! `tests/errors/<name>.expected`; NFKIT_BLESS=1 rewrites the expected files.

use nfkit_lang::{check, diag, Options};
use std::path::Path;

fn render(name: &str, src: &str) -> String {
    let file = format!("{name}.py");
    match check::check(&file, src, &Options::default()) {
        Ok(c) => diag::render(&c.warnings),
        Err(e) => diag::render(&[*e]),
    }
}

#[test]
fn golden_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/errors");
    let bless = std::env::var_os("NFKIT_BLESS").is_some();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/errors")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".py"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 50, "only {} golden files", names.len());
    let mut failures = Vec::new();
    for n in &names {
        let src = std::fs::read_to_string(dir.join(format!("{n}.py"))).expect("source");
        let got = render(n, &src);
        let exp_path = dir.join(format!("{n}.expected"));
        if bless {
            std::fs::write(&exp_path, &got).expect("write expected");
            continue;
        }
        let want = std::fs::read_to_string(&exp_path).unwrap_or_default();
        if got != want {
            failures.push(format!("--- {n}: expected\n{want}--- got\n{got}"));
        }
        // Every error names file:line:col, shows the line and a caret, and says what instead.
        if n != "loop_cap_warning" {
            assert!(got.starts_with(&format!("{n}.py:")), "{n}: {got}");
            assert!(got.contains(": error: "), "{n}: {got}");
            assert!(got.contains("^\n  help: "), "{n}: {got}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
