//! The golden-file loop shared by `errors.rs` and `warnings.rs`: every
//! `tests/<dir>/<name>.py` rendered and compared with
//! `tests/<dir>/<name>.expected`; NFKIT_BLESS=1 rewrites the expected files.

use std::path::Path;

/// Renders each script of `tests/<dir>` with `render(name, source)`, checks
/// the output with `check(name, output)` and compares it with the expected
/// file; fails listing every difference. There must be at least `min`.
pub fn golden(
    dir: &str,
    min: usize,
    render: impl Fn(&str, &str) -> String,
    check: impl Fn(&str, &str),
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    let bless = std::env::var_os("NFKIT_BLESS").is_some();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".py"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= min, "only {} golden files", names.len());
    let mut failures = Vec::new();
    for n in &names {
        let src = std::fs::read_to_string(dir.join(format!("{n}.py"))).expect("source");
        let got = render(n, &src);
        check(n, &got);
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
