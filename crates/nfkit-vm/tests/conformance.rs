//! The bpf_conformance suite: every `tests/*.data` of
//! `../shared/conformance/bpf_conformance` is assembled (its `-- asm`
//! section, conformance syntax) and run in the VM's conformance profile
//! (r1 = the `-- mem` bytes, r2 = their length, helper 5 = the suite's
//! unwind helper). Each must give its `-- result` (all 64 bits of r0) or,
//! for `-- error` cases, fail to load or run. The count is printed and
//! written to `target/nfkit-test-summary/vm-conformance.txt` for
//! `make test`'s summary.

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_object::{Image, ProgType};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig};
use std::path::{Path, PathBuf};

const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/bpf_conformance/tests"
);
const SUMMARY_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../target/nfkit-test-summary"
);

/// One test file's sections.
#[derive(Default)]
struct Case {
    asm: String,
    mem: Vec<u8>,
    result: Option<u64>,
    error: Option<String>,
}

fn parse_case(text: &str) -> Result<Case, String> {
    let mut case = Case::default();
    let mut section = String::new();
    let mut mem_text = String::new();
    let mut result_text = String::new();
    let mut error_text = String::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            section = name.trim().to_string();
            continue;
        }
        match section.as_str() {
            "asm" => {
                case.asm.push_str(line);
                case.asm.push('\n');
            }
            "mem" => {
                mem_text.push_str(line);
                mem_text.push(' ');
            }
            "result" => result_text.push_str(line.trim()),
            "error" => {
                error_text.push_str(line.trim());
            }
            _ => {}
        }
    }
    for tok in mem_text.split_whitespace() {
        case.mem
            .push(u8::from_str_radix(tok, 16).map_err(|_| format!("bad mem byte `{tok}`"))?);
    }
    if !result_text.is_empty() {
        let digits = result_text
            .trim_start_matches("0x")
            .trim_start_matches("0X");
        case.result = Some(
            u64::from_str_radix(digits, 16).map_err(|_| format!("bad result `{result_text}`"))?,
        );
    }
    if !error_text.is_empty() {
        case.error = Some(error_text);
    }
    if case.result.is_none() && case.error.is_none() {
        return Err("neither `-- result` nor `-- error`".into());
    }
    Ok(case)
}

/// Runs one test file; `Err` says why it failed.
fn run_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case = parse_case(&text)?;
    let outcome: Result<u64, String> = (|| {
        let insns = assemble(&case.asm, Some(Syntax::Conformance))
            .map_err(|e| format!("assembler: {e}"))?;
        let image = Image::from_insns("prog", ProgType::Unspec, insns);
        let vm = Vm::new(&image, VmConfig::conformance()).map_err(|e| format!("load: {e}"))?;
        let res = vm.run(0, Context::Raw(&case.mem), &RunOptions::default());
        res.result.map_err(|e| format!("run: {e}"))
    })();
    match (case.result, &case.error, outcome) {
        (Some(want), _, Ok(got)) if got == want => Ok(()),
        (Some(want), _, Ok(got)) => Err(format!("r0 = {got:#x}, expected {want:#x}")),
        (None, Some(_), Err(_)) => Ok(()),
        (None, e, Ok(got)) => Err(format!(
            "returned {got:#x}, expected the error `{}`",
            e.as_deref().unwrap_or("")
        )),
        (_, _, Err(e)) => Err(e),
    }
}

#[test]
fn bpf_conformance_suite() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(SUITE)
        .unwrap_or_else(|e| panic!("the conformance suite must be at {SUITE}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    files.sort();
    let mut failed = Vec::new();
    for f in &files {
        if let Err(why) = run_case(f) {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            failed.push(format!("{name}: {why}"));
        }
    }
    let passed = files.len() - failed.len();
    let line = format!("conformance: {passed}/{} passed", files.len());
    println!("{line}");
    for f in &failed {
        println!("  FAILED {f}");
    }
    if std::fs::create_dir_all(SUMMARY_DIR).is_ok() {
        let _ = std::fs::write(
            Path::new(SUMMARY_DIR).join("vm-conformance.txt"),
            format!("{line}\n"),
        );
    }
    assert_eq!(files.len(), 313, "the suite has 313 tests");
    assert!(failed.is_empty(), "{line}\n{}", failed.join("\n"));
}
