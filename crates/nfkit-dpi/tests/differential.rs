//! The acceptance differential of issue 20: for every catalogue set,
//! random payloads (uniform bytes, bytes from the patterns' alphabet,
//! and payloads with a sample of each pattern at a random offset, at the
//! start or at the end) through the `dpi` NF in the VM and, as root, in
//! the kernel (`BPF_PROG_TEST_RUN`); the answer must be the `regex`
//! crate's first match on the same bytes.
//!
//! 100,000 payloads per set by default (a few seconds in all);
//! `NFKIT_DPI_CASES` sets another count.

mod common;
use common::{expected, filler, frame, payload, payload_upto, reference, samples};
use nfkit_corpus::clang::BpfBuild;
use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::{catalogue, compile, Dfa, Match, Options, Tables};
use nfkit_object::Image;
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};
use std::path::PathBuf;

fn cases_per_set() -> usize {
    std::env::var("NFKIT_DPI_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn probe() -> Image {
    probe_with(&[])
}

fn probe_with(defines: &[&str]) -> Image {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut b = BpfBuild::new(root.join("crates/nfkit-dpi/tests/progs/dpi_probe.c"))
        .include(root.join("nf/include"))
        .include(root.join("nf"))
        .define("NF_HOOK_XDP".to_string());
    for d in defines {
        b = b.define(d.to_string());
    }
    let obj = b.bytes().expect("clang builds the probe");
    Image::from_elf(&obj, "dpi_probe.o").expect("image")
}

struct Case {
    frame: Vec<u8>,
    want: u64,
}

/// The cases of catalogue set `set`, and how many match each pattern.
fn cases(set: &catalogue::Set, n: usize, seed: u64) -> (Vec<Case>, Vec<usize>) {
    let res = reference(set.patterns, false);
    let samples = samples(set.name);
    let mut alphabet: Vec<u8> = samples.iter().flat_map(|s| s.iter().copied()).collect();
    alphabet.extend_from_slice(b" +%'=;-");
    let mut g = Gen(seed);
    let mut per = vec![0usize; set.patterns.len()];
    let cases = (0..n)
        .map(|_| {
            let p = payload(&mut g, &samples, &alphabet);
            let want = expected(&res, &p);
            if let Some(m) = Match::from_result(want) {
                per[m.pattern] += 1;
            }
            Case {
                frame: frame(p, false),
                want,
            }
        })
        .collect();
    (cases, per)
}

fn sets() -> Vec<(&'static catalogue::Set, Dfa)> {
    catalogue::ALL
        .iter()
        .map(|s| {
            (
                s,
                compile(s.patterns, &Options::default()).expect("compiles"),
            )
        })
        .collect()
}

/// Arguments of the probe: set `set`, the NF's default limit (2048,
/// more than any payload here).
fn args(set: usize) -> [([u8; 4], [u8; 8]); 2] {
    args_limit(set, 0)
}

fn args_limit(set: usize, limit: u64) -> [([u8; 4], [u8; 8]); 2] {
    [
        (0u32.to_ne_bytes(), (set as u64).to_ne_bytes()),
        (1u32.to_ne_bytes(), limit.to_ne_bytes()),
    ]
}

fn check_counts(name: &str, per: &[usize], n: usize) {
    eprintln!("set {name}: {n} payloads, matches per pattern {per:?}");
    for (i, &c) in per.iter().enumerate() {
        assert!(
            c * 200 >= n,
            "set {name}: pattern {i} matched only {c} of {n} payloads"
        );
    }
}

fn report(wrong: &[String], total: usize) {
    assert!(
        wrong.is_empty(),
        "{} disagreements of {total}; first ones:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}

#[test]
fn every_catalogue_set_in_the_vm_equals_the_regex_crate() {
    let n = cases_per_set();
    let sets = sets();
    let dfas: Vec<Dfa> = sets.iter().map(|(_, d)| d.clone()).collect();
    let t = Tables::build(&dfas).expect("tables");
    let vm = Vm::new(&probe(), VmConfig::kernel()).expect("VM load");
    let zero = 0u32.to_ne_bytes();
    let map = |m: &str| vm.map(m).expect("map");
    map("nf_dpi_next").update(&zero, &t.next, 0).expect("next");
    map("nf_dpi_accept")
        .update(&zero, &t.accept, 0)
        .expect("acc");
    for (i, e) in t.sets.iter().enumerate() {
        map("nf_dpi_sets")
            .update(&(i as u32).to_ne_bytes(), e, 0)
            .expect("set");
    }
    let mut wrong = Vec::new();
    for (si, (set, _)) in sets.iter().enumerate() {
        let (cases, per) = cases(set, n, 0x9e37_79b9_7f4a_7c15 ^ si as u64);
        check_counts(set.name, &per, n);
        for (k, v) in args(si) {
            map("probe_args").update(&k, &v, 0).expect("arg");
        }
        for (i, c) in cases.iter().enumerate() {
            let res = vm.run(
                "probe",
                Context::Xdp(XdpMd::new(&c.frame)),
                &RunOptions::default(),
            );
            let got = match &res.result {
                Err(e) => {
                    wrong.push(format!("{} case {i}: VM fault {e}", set.name));
                    continue;
                }
                Ok(_) => map("probe_out")
                    .lookup(&zero)
                    .expect("lookup")
                    .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64"))),
            };
            if got != Some(c.want) {
                wrong.push(format!(
                    "{} case {i}: VM {got:x?}, regex {:x}",
                    set.name, c.want
                ));
            }
        }
    }
    report(&wrong, n * sets.len());
}

#[test]
fn every_catalogue_set_in_the_kernel_equals_the_regex_crate() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let n = cases_per_set();
    let sets = sets();
    let dfas: Vec<Dfa> = sets.iter().map(|(_, d)| d.clone()).collect();
    let t = Tables::build(&dfas).expect("tables");
    let k = nfkit_kernel::load_image(&probe(), &nfkit_kernel::LoadOptions::default())
        .expect("the kernel verifies the dpi NF");
    let zero = 0u32.to_ne_bytes();
    let map = |m: &str| k.map(m).expect("map");
    map("nf_dpi_next").update(&zero, &t.next, 0).expect("next");
    map("nf_dpi_accept")
        .update(&zero, &t.accept, 0)
        .expect("acc");
    for (i, e) in t.sets.iter().enumerate() {
        map("nf_dpi_sets")
            .update(&(i as u32).to_ne_bytes(), e, 0)
            .expect("set");
    }
    let prog = k.prog("probe").expect("probe");
    let mut wrong = Vec::new();
    for (si, (set, _)) in sets.iter().enumerate() {
        let (cases, per) = cases(set, n, 0x9e37_79b9_7f4a_7c15 ^ si as u64);
        check_counts(set.name, &per, n);
        for (key, v) in args(si) {
            map("probe_args").update(&key, &v, 0).expect("arg");
        }
        for (i, c) in cases.iter().enumerate() {
            if let Err(e) = prog.test_run(&nfkit_kernel::TestRun::packet(&c.frame)) {
                wrong.push(format!("{} case {i}: kernel: {e}", set.name));
                continue;
            }
            let got = map("probe_out")
                .lookup(&zero)
                .expect("lookup")
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")));
            if got != Some(c.want) {
                wrong.push(format!(
                    "{} case {i}: kernel {got:x?}, regex {:x}",
                    set.name, c.want
                ));
            }
        }
    }
    report(&wrong, n * sets.len());
}

/// Most UDP payload bytes in a 9000-byte IPv4 jumbo packet.
const JUMBO: usize = 9000 - 28;

/// Jumbo payloads: half start with 3000 to 8000 bytes of filler (so the
/// scan runs deep into the frame's fragments), the rest as above but up
/// to JUMBO bytes.
fn jumbo_cases(set: &catalogue::Set, n: usize, seed: u64) -> (Vec<Case>, usize) {
    let res = reference(set.patterns, false);
    let samples = samples(set.name);
    let mut alphabet: Vec<u8> = samples.iter().flat_map(|s| s.iter().copied()).collect();
    alphabet.extend_from_slice(b" +%'=;-");
    let mut g = Gen(seed);
    let mut deep = 0;
    let cases = (0..n)
        .map(|_| {
            let mut p = Vec::new();
            if g.index(2) == 0 {
                let pre = 3000 + g.index(5000);
                filler(&mut g, &alphabet, pre, &mut p);
            }
            let rest = payload_upto(&mut g, &samples, &alphabet, JUMBO - p.len());
            p.extend_from_slice(&rest);
            let want = expected(&res, &p);
            if Match::from_result(want).is_some_and(|m| m.end > 4096) {
                deep += 1;
            }
            Case {
                frame: frame(p, false),
                want,
            }
        })
        .collect();
    (cases, deep)
}

/// Payloads up to 8972 bytes (9014-byte frames) scanned whole (limit
/// 9000) through `bpf_loop`: the kernel verifies the NF in a
/// multi-buffer XDP program (`xdp.frags`) and its answers equal the
/// regex crate's; the VM too.
#[test]
fn jumbo_frames_equal_the_regex_crate() {
    let n = 2000;
    let sets = sets();
    let dfas: Vec<Dfa> = sets.iter().map(|(_, d)| d.clone()).collect();
    let t = Tables::build(&dfas).expect("tables");
    let zero = 0u32.to_ne_bytes();
    let vm = Vm::new(&probe(), VmConfig::kernel()).expect("VM load");
    let kernel = if nfkit_kernel::is_root() {
        Some(
            nfkit_kernel::load_image(
                &probe_with(&["PROBE_FRAGS"]),
                &nfkit_kernel::LoadOptions::default(),
            )
            .expect("the kernel verifies the dpi NF for multi-buffer XDP"),
        )
    } else {
        eprintln!("kernel part skipped: needs root");
        None
    };
    type Update<'a> = Box<dyn Fn(&str, &[u8], &[u8]) + 'a>;
    type Lookup<'a> = Box<dyn Fn() -> Option<u64> + 'a>;
    type Run<'a> = Box<dyn Fn(&[u8]) -> Result<(), String> + 'a>;
    let mut engines: Vec<(&str, Update, Lookup, Run)> = vec![(
        "VM",
        Box::new(|m: &str, k: &[u8], v: &[u8]| {
            vm.map(m).expect("map").update(k, v, 0).expect("update")
        }),
        Box::new(|| {
            vm.map("probe_out")
                .expect("out")
                .lookup(&zero)
                .expect("lookup")
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")))
        }),
        Box::new(|f: &[u8]| {
            vm.run("probe", Context::Xdp(XdpMd::new(f)), &RunOptions::default())
                .result
                .map(|_| ())
                .map_err(|e| e.to_string())
        }),
    )];
    if let Some(k) = &kernel {
        let prog = k.prog("probe").expect("probe");
        engines.push((
            "kernel",
            Box::new(move |m: &str, key: &[u8], v: &[u8]| {
                k.map(m).expect("map").update(key, v, 0).expect("update")
            }),
            Box::new(move || {
                k.map("probe_out")
                    .expect("out")
                    .lookup(&zero)
                    .expect("lookup")
                    .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")))
            }),
            Box::new(move |f: &[u8]| {
                prog.test_run(&nfkit_kernel::TestRun::packet(f))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }),
        ));
    }
    let mut wrong = Vec::new();
    for (name, update, lookup, run) in &mut engines {
        update("nf_dpi_next", &zero, &t.next);
        update("nf_dpi_accept", &zero, &t.accept);
        for (i, e) in t.sets.iter().enumerate() {
            update("nf_dpi_sets", &(i as u32).to_ne_bytes(), e);
        }
        for (si, (set, _)) in sets.iter().enumerate() {
            let (cases, deep) = jumbo_cases(set, n, 0x5851_f42d_4c95_7f2d ^ si as u64);
            // Sets with a pattern not anchored at the start must match
            // deep in the frame too.
            if set.patterns.iter().any(|p| !p.starts_with('^')) {
                assert!(
                    deep * 50 >= n,
                    "set {}: {deep} matches past byte 4096",
                    set.name
                );
            }
            for (k, v) in args_limit(si, 9000) {
                update("probe_args", &k, &v);
            }
            for (i, c) in cases.iter().enumerate() {
                if let Err(e) = run(&c.frame) {
                    wrong.push(format!("{name} {} jumbo case {i}: {e}", set.name));
                    continue;
                }
                let got = lookup();
                if got != Some(c.want) {
                    wrong.push(format!(
                        "{name} {} jumbo case {i} ({} bytes): {got:x?}, regex {:x}",
                        set.name,
                        c.frame.len(),
                        c.want
                    ));
                }
            }
        }
    }
    report(&wrong, n * sets.len() * engines.len());
}

/// The bench's hand-written baseline (`tests/progs/dpi_hand.c`,
/// `(?i)union\s+select` without the DFA) is verified by the kernel and
/// agrees with the regex crate, so the bench compares equal work.
#[test]
fn the_hand_written_baseline_equals_the_regex_crate() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let obj = BpfBuild::new(root.join("crates/nfkit-dpi/tests/progs/dpi_hand.c"))
        .include(root.join("nf/include"))
        .include(root.join("nf"))
        .define("NF_HOOK_XDP".to_string())
        .bytes()
        .expect("clang builds the baseline");
    let image = Image::from_elf(&obj, "dpi_hand.o").expect("image");
    let k = nfkit_kernel::load_image(&image, &nfkit_kernel::LoadOptions::default())
        .expect("the kernel verifies the baseline");
    let prog = k.prog("hand").expect("hand");
    let set = catalogue::Set {
        name: "union_select",
        doc: "",
        patterns: &[r"(?i)union\s+select"],
    };
    let res = reference(set.patterns, false);
    let samples: Vec<&[u8]> = vec![b"union select", b"UNION\t\n SeLeCt", b"uniunion  select"];
    let alphabet = b"unioselct \t";
    let mut g = Gen(0x1234_5678_9abc_def1);
    let (mut wrong, mut matched) = (Vec::new(), 0);
    for i in 0..20_000 {
        let p = payload(&mut g, &samples, alphabet);
        let want = expected(&res, &p);
        matched += usize::from(want != 0);
        prog.test_run(&nfkit_kernel::TestRun::packet(&frame(p, false)))
            .expect("test run");
        let got = k
            .map("probe_out")
            .expect("out")
            .lookup(&0u32.to_ne_bytes())
            .expect("lookup")
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")));
        if got != Some(want) {
            wrong.push(format!("case {i}: hand {got:x?}, regex {want:x}"));
        }
    }
    assert!(matched > 2000, "{matched} matches");
    report(&wrong, 20_000);
}
