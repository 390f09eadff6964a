//! Reject agreement (issue 13 item 3): every entry program of the
//! differential corpus is loaded on its own into the running kernel
//! (nfkit-kernel) and into the VM (`VmConfig::kernel()`), and the
//! verdicts are tallied: both accept, both refuse, kernel-only refusal,
//! VM-only refusal.
//!
//! The programs: `corpus/*.c` (nfkit-corpus), `tests/progs/helpers.c`,
//! the isolation programs of nfkit-vm's `tests/isolation/progs.rs`, every
//! object of the NF catalogue, and `tests/progs/refused.c` (one program
//! per class of out-of-bounds stack and map-value access, and some the
//! kernel accepts, compiled here).
//!
//! Asserted: no VM-only refusal; every kernel-only refusal is one of
//! [`KERNEL_ONLY`], each with its reason (the same list is in
//! `docs/vm.md`); where both refuse a program of `refused.c` for an
//! out-of-bounds access, the VM's reason is a line of the kernel's log.
//! The figures are printed and written to
//! `target/nfkit-test-summary/reject-agreement.txt`.

#[path = "../../nfkit-vm/tests/isolation/progs.rs"]
mod progs;

use nfkit_kernel::{load_image, KernelError, LoadOptions};
use nfkit_object::Image;
use nfkit_vm::{LoadError, Rule, Vm, VmConfig};
use std::path::PathBuf;

/// The kernel refuses these, the VM loads them and checks the access at
/// run time (where it faults): `(program, why)`.
const KERNEL_ONLY: &[(&str, &str)] = &[
    (
        "refused/stack_var_partly_below",
        "one of its two stack offsets is in the frame: out of bounds on some values only",
    ),
    (
        "refused/value_var_partly_past_end",
        "one of its two value offsets is in the value: out of bounds on some values only",
    ),
    (
        "refused/value_without_null_check",
        "the VM does not track null checks at load; a null pointer faults when used",
    ),
];

/// Helpers the VM does not implement (issue 13, "Helpers"): an entry that
/// reaches one would be refused by the VM only, for want of the helper,
/// not for a verifier rule. Each VM-only refusal must be one of these;
/// none is left among the programs checked here (`bpf_clone_redirect`
/// and `bpf_csum_update`, which the TC NFs use, landed).
const VM_MISSING_HELPERS: &[&str] = &[];

/// A verdict: `None` accepted, `Some(reason)` refused.
type Verdict = Option<String>;

/// One entry program of one object.
struct Case {
    label: String,
    image: Image,
    entry: String,
}

fn cases_of(group: &str, image: Image) -> Vec<Case> {
    let names: Vec<String> = image.entries.iter().map(|e| e.name.clone()).collect();
    names
        .into_iter()
        .map(|entry| Case {
            label: format!("{group}/{entry}"),
            image: image.clone(),
            entry,
        })
        .collect()
}

/// Compiles `tests/progs/<name>.c`.
fn compile(name: &str) -> Image {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = dir.join(format!("tests/progs/{name}.c"));
    let out = nfkit_corpus::BpfBuild::new(&src)
        .arg("-mcpu=v3")
        .include(dir.join("../../corpus"))
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    let image = Image::from_file(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
    let _ = std::fs::remove_file(&out);
    image
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for e in nfkit_corpus::ENTRIES {
        let image = Image::from_elf(e.object, e.name).unwrap_or_else(|err| panic!("{err}"));
        out.extend(cases_of(&format!("corpus/{}", e.name), image));
    }
    out.extend(cases_of("helpers", compile("helpers")));
    for b in progs::bad() {
        let image = progs::image(b.name, b.asm, b.maps);
        out.extend(cases_of("isolation", image));
    }
    for m in nfkit_nf::catalogue() {
        for o in m.objects {
            let image = Image::from_elf(o.object, o.path).unwrap_or_else(|e| panic!("{e}"));
            out.extend(cases_of(&format!("nf/{}({})", m.name, o.hook), image));
        }
    }
    out.extend(cases_of("refused", compile("refused")));
    out
}

fn vm_verdict(c: &Case) -> (Verdict, Option<LoadError>) {
    match Vm::new(&c.image, VmConfig::kernel()) {
        Err(e) => (Some(e.to_string()), Some(e)),
        Ok(vm) => match vm.entry_refused(c.entry.as_str()) {
            Some(e) => (Some(e.to_string()), Some(e.clone())),
            None => (None, None),
        },
    }
}

/// The kernel's verdict, and its whole verifier log when it refuses.
fn kernel_verdict(c: &Case) -> (Verdict, String) {
    let opts = LoadOptions {
        entries: Some(vec![c.entry.clone()]),
        ..LoadOptions::default()
    };
    match load_image(&c.image, &opts) {
        Ok(_) => (None, String::new()),
        Err(KernelError::Verifier { log, .. }) => {
            let last = log
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.starts_with("processed"));
            (Some(last.unwrap_or("").trim().to_string()), log)
        }
        Err(e) => (Some(e.to_string()), String::new()),
    }
}

/// The VM's out-of-bounds reason, which must be a line of the kernel's
/// log (`None` for other refusals).
fn reason_mismatch(c: &Case, vm: &Option<LoadError>, log: &str) -> Option<String> {
    let Some(LoadError::Insn { rule, detail, .. }) = vm else {
        return None;
    };
    let bounds = matches!(
        rule,
        Rule::StackAccess | Rule::MapValueAccess | Rule::MemAccess
    );
    if !bounds || log.lines().any(|l| l.contains(detail.as_str())) {
        return None;
    }
    Some(format!(
        "{}: VM says `{detail}`, not in the kernel's log:\n{}",
        c.label,
        log.lines().rev().take(4).collect::<Vec<_>>().join(" | ")
    ))
}

/// Whether the VM refused for a helper of [`VM_MISSING_HELPERS`].
fn missing_helper(e: &Option<LoadError>) -> bool {
    match e {
        Some(LoadError::Insn {
            rule: Rule::UnknownHelper,
            detail,
            ..
        }) => VM_MISSING_HELPERS
            .iter()
            .any(|h| detail.contains(&format!("({h})"))),
        _ => false,
    }
}

#[test]
fn vm_refuses_only_what_the_kernel_refuses() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (mut both_accept, mut both_refuse) = (0, 0);
    let (mut kernel_only, mut vm_only) = (Vec::new(), Vec::new());
    let mut wrong = Vec::new();
    let cases = cases();
    for c in &cases {
        let (vm, vm_err) = vm_verdict(c);
        let (kernel, log) = kernel_verdict(c);
        let row = |v: &Verdict| v.clone().unwrap_or_else(|| "accepted".into());
        println!("{:<52} VM: {}", c.label, row(&vm));
        println!("{:<52} kernel: {}", "", row(&kernel));
        match (&vm, &kernel) {
            (None, None) => both_accept += 1,
            (Some(_), Some(_)) => {
                both_refuse += 1;
                if c.label.starts_with("refused/") {
                    wrong.extend(reason_mismatch(c, &vm_err, &log));
                }
            }
            (None, Some(k)) => kernel_only.push((c.label.clone(), k.clone())),
            (Some(v), None) => vm_only.push((c.label.clone(), vm_err.clone(), v.clone())),
        }
    }
    let total = cases.len();
    let (helper_only, vm_only): (Vec<_>, Vec<_>) =
        vm_only.into_iter().partition(|(_, e, _)| missing_helper(e));
    let mut summary = format!(
        "reject agreement: {}/{total} programs (both accept {both_accept}, both refuse {both_refuse}); \
         {} kernel-only refusals listed; {} VM-only refusals",
        both_accept + both_refuse,
        kernel_only.len(),
        vm_only.len(),
    );
    if !helper_only.is_empty() {
        summary.push_str(&format!(
            "; {} VM refusals for a helper it lacks ({})",
            helper_only.len(),
            VM_MISSING_HELPERS.join(", ")
        ));
    }
    println!("{summary}");
    for (label, why) in &kernel_only {
        println!("kernel-only: {label}: {why}");
    }
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/nfkit-test-summary"
    ));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("reject-agreement.txt"), format!("{summary}\n"));
    for (label, why) in &kernel_only {
        if !KERNEL_ONLY.iter().any(|(l, _)| l == label) {
            wrong.push(format!("kernel-only refusal not listed: {label}: {why}"));
        }
    }
    for (label, _) in KERNEL_ONLY {
        if !kernel_only.iter().any(|(l, _)| l == label) {
            wrong.push(format!(
                "listed kernel-only refusal did not happen: {label}"
            ));
        }
    }
    wrong.extend(
        vm_only
            .iter()
            .map(|(label, _, why)| format!("VM-only refusal: {label}: {why}")),
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(both_refuse >= 20, "too few refusals: {summary}");
}
