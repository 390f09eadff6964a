//! The checker's warnings that are not about loops (implicit narrowing of
//! a call result, comparisons decided by a type's range): golden files
//! `tests/warnings/<name>.py` give `tests/warnings/<name>.expected`, as
//! `nfkit check` prints them; NFKIT_BLESS=1 rewrites the expected files.
//! Every script compiles and warns. A comparison with a literal out of
//! the operand's range keeps its (constant) value at run time (checked in
//! the VM by nfkit-control's tests/vm.rs).

mod golden;
use golden::golden;
use nfkit_lang::{check, diag, Options};

#[test]
fn golden_warnings() {
    let render =
        |n: &str, src: &str| match check::check(&format!("{n}.py"), src, &Options::default()) {
            Ok(c) => diag::render(&c.warnings),
            Err(e) => panic!("{n} does not compile:\n{e}"),
        };
    golden("warnings", 3, render, |n, got| {
        assert!(got.contains(": warning: "), "{n}: no warning");
        assert!(got.contains("^\n  help: "), "{n}: {got}");
    });
}
