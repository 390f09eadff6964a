//! Golden files: every error kind (and the warnings) of the checker, as
//! `nfkit check` prints them. `tests/errors/<name>.py` gives
//! `tests/errors/<name>.expected`; NFKIT_BLESS=1 rewrites the expected files.

mod golden;
use golden::golden;
use nfkit_lang::{check, diag, Options};

fn render(name: &str, src: &str) -> String {
    let file = format!("{name}.py");
    match check::check(&file, src, &Options::default()) {
        Ok(c) => diag::render(&c.warnings),
        Err(e) => diag::render(&[*e]),
    }
}

#[test]
fn golden_errors() {
    golden("errors", 50, render, |n, got| {
        // Every error names file:line:col, shows the line and a caret, and says what instead.
        if n != "loop_cap_warning" {
            assert!(got.starts_with(&format!("{n}.py:")), "{n}: {got}");
            assert!(got.contains(": error: "), "{n}: {got}");
            assert!(got.contains("^\n  help: "), "{n}: {got}");
        }
    });
}
