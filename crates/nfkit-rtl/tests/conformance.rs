//! The bpf_conformance suite (`../shared/conformance/bpf_conformance`,
//! as nfkit-vm's test finds it) on the RTL core against nfkit's VM: every
//! program within the core's subset that the VM loads must give the same
//! r0 (or fault on both), the same memory afterwards and the same
//! instruction count; a sample is co-simulated instruction by instruction
//! (the retired pcs equal the VM's trace). Programs outside the subset
//! are listed with the loader's reason.

mod common;

use common::{compare, core_for, rtl_run, vm_load, vm_run};
use nfkit_isa::asm::{assemble, Syntax};
use nfkit_isa::{CallKind, Insn};
use nfkit_rtl::Program;
use std::path::PathBuf;

const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/bpf_conformance/tests"
);
/// Where `make test`'s summary collects headline numbers.
const SUMMARY_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../target/nfkit-test-summary"
);

/// The `-- asm` and `-- mem` sections of one test file.
fn parse(text: &str) -> Result<(String, Vec<u8>), String> {
    let (mut asm, mut mem_text, mut section) = (String::new(), String::new(), String::new());
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            section = name.trim().to_string();
            continue;
        }
        match section.as_str() {
            "asm" => {
                asm.push_str(line);
                asm.push('\n');
            }
            "mem" => {
                mem_text.push_str(line);
                mem_text.push(' ');
            }
            _ => {}
        }
    }
    let mem = mem_text
        .split_whitespace()
        .map(|t| u8::from_str_radix(t, 16).map_err(|_| format!("bad mem byte `{t}`")))
        .collect::<Result<Vec<u8>, String>>()?;
    Ok((asm, mem))
}

#[test]
fn conformance_programs_match_the_vm() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(SUITE)
        .unwrap_or_else(|e| panic!("the conformance suite must be at {SUITE}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    files.sort();
    let (mut matched, mut traced) = (0, 0);
    let mut outside = Vec::new();
    let mut failed = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(f).expect("readable test file");
        let Ok((asm, mem)) = parse(&text) else {
            continue;
        };
        let Ok(insns) = assemble(&asm, Some(Syntax::Conformance)) else {
            continue;
        };
        // The suite's helper 5 is its own unwind helper, not the core's
        // bpf_ktime_get_ns: such programs are outside what can be compared.
        if insns.iter().any(|i| {
            matches!(
                i,
                Insn::Call {
                    kind: CallKind::Helper,
                    ..
                }
            )
        }) {
            outside.push(format!("{name}: calls the suite's own helper"));
            continue;
        }
        if let Err(e) = Program::from_insns("prog", &insns) {
            outside.push(format!("{name}: {e}"));
            continue;
        }
        let Ok(vm) = vm_load(&insns) else {
            continue; // an `-- error` case the VM refuses at load
        };
        let trace = matched % 4 == 0;
        let want = vm_run(&vm, &mem, trace);
        let mut core = core_for(&insns);
        let got = rtl_run(&mut core, &mem, trace);
        let mut verdict = compare(&want, &got);
        if verdict.is_ok() && trace && want.r0.is_some() {
            if want.trace != got.trace {
                verdict = Err(format!("trace: VM {:?}, RTL {:?}", want.trace, got.trace));
            } else {
                traced += 1;
            }
        }
        match verdict {
            Ok(()) => matched += 1,
            Err(why) => failed.push(format!("{name}: {why}")),
        }
    }
    println!("conformance on the RTL core: {matched} match the VM ({traced} co-simulated by trace), {} outside the subset:", outside.len());
    for o in &outside {
        println!("  {o}");
    }
    let line = format!(
        "rtl conformance: {matched} programs equal to the VM ({traced} by trace), {} outside the core's subset, {} differ",
        outside.len(),
        failed.len()
    );
    if std::fs::create_dir_all(SUMMARY_DIR).is_ok() {
        let _ = std::fs::write(
            std::path::Path::new(SUMMARY_DIR).join("rtl-conformance.txt"),
            format!("{line}\n"),
        );
    }
    assert!(
        failed.is_empty(),
        "{} differ from the VM:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(matched >= 150, "only {matched} conformance programs ran");
    assert!(traced >= 20, "only {traced} traces compared");
}
