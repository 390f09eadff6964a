//! Chain-language speed, each example against the same logic written by
//! hand in C (`examples/c/NAME.c`, clang -O2):
//!
//! * compile time of each example script (parse, check, generate, link
//!   with its NFs and classifier; criterion, then the mean in the table);
//! * instructions: the static count of the compiled program (classifier,
//!   chains and the NF functions they reach) and of the C program, and the
//!   instructions the VM executes per packet on the example's pcap;
//! * time per packet in the VM: the example's pcap, fresh maps each pass,
//!   the clock pinned to each packet's time (docs/abi.md 7), only the run
//!   itself timed, on the engine `NFKIT_BENCH_ENGINE` names (`jit` or
//!   `interp`; default `Engine::best()`);
//! * time per packet in the kernel (root only): `BPF_PROG_TEST_RUN`, each
//!   packet of the pcap in order `NFKIT_BENCH_REPEAT` times (default 100)
//!   at its pinned time, the kernel's own ns per run.
//!
//! Ratios are nfkit / hand C. The "same" column says whether both gave
//! the same verdict on every packet (tests/hand_c.rs asserts it).

#[path = "baseline/mod.rs"]
mod baseline;

use baseline::*;
use criterion::{black_box, Criterion};
use nfkit_lang::{compile, Options};
use nfkit_vm::Engine;
use std::time::{Duration, Instant};

/// VM time per packet (ns), executed instructions per packet, verdicts
/// of the first pass.
fn vm_side(
    ex: &Example,
    side: Side,
    budget: Duration,
    engine: Engine,
) -> Result<(f64, f64, Vec<u64>), String> {
    let t0 = Instant::now();
    let mut spent = Duration::ZERO;
    let (mut runs, mut insns) = (0u64, 0u64);
    let mut codes = Vec::new();
    let mut first = true;
    while first || t0.elapsed() < budget {
        let mut vm = VmProg::new_on(ex, side, engine)?;
        for (ts, frame) in &ex.packets {
            vm.pin(*ts)?;
            let t = Instant::now();
            let r = vm.run_only(frame);
            spent += t.elapsed();
            runs += 1;
            insns += r.insns;
            if first {
                codes.push(r.code());
            }
        }
        first = false;
    }
    let n = runs.max(1) as f64;
    Ok((spent.as_nanos() as f64 / n, insns as f64 / n, codes))
}

/// Kernel ns per packet (mean of the kernel's times) and verdicts.
fn kernel_side(ex: &Example, side: Side, repeat: u32) -> Result<(f64, Vec<u64>), String> {
    let k = KernelProg::load(ex, side)?;
    let (mut total, mut n) = (0f64, 0u64);
    let mut codes = Vec::new();
    for (ts, frame) in &ex.packets {
        let r = k.run(frame, *ts, repeat)?;
        total += r.ns as f64;
        n += 1;
        codes.push(r.retval as u64);
    }
    Ok((total / n.max(1) as f64, codes))
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let root = is_root();
    let repeat: u32 = std::env::var("NFKIT_BENCH_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let engine = match std::env::var("NFKIT_BENCH_ENGINE") {
        Ok(v) => v
            .parse::<Engine>()
            .unwrap_or_else(|e| panic!("NFKIT_BENCH_ENGINE: {e}")),
        Err(_) => Engine::best(),
    };
    if root {
        let _ = nfkit_kernel::pin_thread_to_cpu(0);
    }
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for name in EXAMPLES {
        let ex = match load_example(name) {
            Ok(e) => e,
            Err(e) => {
                notes.push(format!("{name}: {e}"));
                continue;
            }
        };
        let opts = Options::default();
        c.bench_function(&format!("compile/{name}"), |b| {
            b.iter(|| compile(name, black_box(&ex.source), &opts).map(|c| c.image.insns.len()))
        });
        let t = Instant::now();
        for _ in 0..50 {
            let _ = black_box(compile(name, &ex.source, &opts));
        }
        let compile_ms = t.elapsed().as_secs_f64() * 1000.0 / 50.0;

        let budget = Duration::from_millis(300);
        let vm = vm_side(&ex, Side::Nfkit, budget, engine).and_then(|n| {
            let h = vm_side(&ex, Side::HandC, budget, engine)?;
            Ok((n, h))
        });
        let (vm_cols, vm_same) = match vm {
            Ok(((nns, nins, ncodes), (hns, hins, hcodes))) => (
                format!(
                    "{nins:>7.1} {hins:>6.1} {nns:>8.0} {hns:>7.0} {:>6}",
                    ratio(nns, hns)
                ),
                ncodes == hcodes,
            ),
            Err(e) => {
                notes.push(format!("{name} VM: {e}"));
                (format!("{:>38}", "-"), false)
            }
        };
        let (k_cols, k_same) = if root {
            match kernel_side(&ex, Side::Nfkit, repeat).and_then(|n| {
                let h = kernel_side(&ex, Side::HandC, repeat)?;
                Ok((n, h))
            }) {
                Ok(((nns, ncodes), (hns, hcodes))) => (
                    format!("{nns:>8.1} {hns:>7.1} {:>6}", ratio(nns, hns)),
                    Some(ncodes == hcodes),
                ),
                Err(e) => {
                    notes.push(format!("{name} kernel: {e}"));
                    (format!("{:>23}", "-"), Some(false))
                }
            }
        } else {
            (format!("{:>23}", "(root)"), None)
        };
        let same = match (vm_same, k_same) {
            (true, Some(true) | None) => "yes",
            _ => "NO",
        };
        lines.push(format!(
            "{name:<14} {:>5} {compile_ms:>7.2} {:>6} {:>5} {vm_cols} {k_cols} {same:>5}",
            ex.source.lines().count(),
            ex.compiled.image.insns.len(),
            ex.hand.insns.len(),
        ));
    }
    c.final_summary();
    println!("\nnfkit (compiled chain) against the same logic by hand in C (clang -O2); ratio = nfkit / C");
    println!(
        "{:<14} {:>5} {:>7} {:>12} {:>38} {:>23} {:>5}",
        "", "", "compile", "static insns", "VM (pcap, fresh maps)", "kernel test run", ""
    );
    println!(
        "{:<14} {:>5} {:>7} {:>6} {:>5} {:>7} {:>6} {:>8} {:>7} {:>6} {:>8} {:>7} {:>6} {:>5}",
        "example",
        "lines",
        "ms",
        "nfkit",
        "C",
        "ins/pk",
        "C",
        "ns/pk",
        "C",
        "ratio",
        "ns/pk",
        "C",
        "ratio",
        "same"
    );
    for l in &lines {
        println!("{l}");
    }
    println!(
        "VM: engine {engine} (NFKIT_BENCH_ENGINE=jit|interp; JIT fallbacks run on the interpreter)"
    );
    if root {
        println!("kernel: BPF_PROG_TEST_RUN, each pcap packet {repeat} times in a row (NFKIT_BENCH_REPEAT), clock pinned, CPU 0");
    } else {
        println!("kernel columns skipped: BPF_PROG_TEST_RUN needs root");
    }
    for n in notes {
        println!("note: {n}");
    }
}
