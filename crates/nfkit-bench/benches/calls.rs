//! What an NF call costs: a chain making N calls to a no-op NF
//! (`c/bnop.c`: `nop(x)` gives x back) compiled by nfkit-lang into one
//! program (static mode: inlined into one function, docs/cost.md; and
//! without inlining, "static, calls": bpf-to-bpf calls), against N no-op XDP programs
//! tail-calling each other (`c/tail_nop.c`), and the same chain in
//! dynamic mode (each NF call is a tail call to the NF's dynamic entry
//! and one back to the chain's next segment), for N = 0, 1, 2, 4, 8, 16.
//!
//! ns per packet are the kernel's own `BPF_PROG_TEST_RUN` times (repeat
//! runs on one 64-byte UDP frame). The static chain's time includes
//! nfkit's classifier (parse once into the info block, statistics),
//! which the bare tail-call programs do not have, so the summary also
//! gives the cost per call: (t(N) - t(0)) / N for the largest N
//! measured (16; 8 for the tail calls, which have 8 no-op programs).
//! The summary's rounds are interleaved: each round runs every subject
//! once (200k runs), so the machine's slow spells hit all alike;
//! `NFKIT_CALLS_ROUNDS=N` sets their number (9), `NFKIT_CALLS_QUICK=1`
//! leaves the criterion groups out. Needs root (skipped otherwise).

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion};
use nfkit_bench::*;
use std::time::Duration;

const NS: [usize; 6] = [0, 1, 2, 4, 8, 16];

/// A chain making `n` calls to `nop`, every packet, XDP.
fn script(n: usize) -> String {
    let mut s = String::from(
        "from nf.bnop import nop\nfrom nf.classify import every_packet\n\ndef calls() -> u64:\n    x: u64 = 1\n",
    );
    for _ in 0..n {
        s.push_str("    x = nop(x)\n");
    }
    s.push_str("    return PASS\n\nevery_packet(calls)\nattach(\"eth0\", \"xdp\")\n");
    s
}

/// One row of the summary table: median ns per packet for `n` calls, per
/// variant (`None` when the variant was left out).
struct Row {
    n: usize,
    stat: Option<f64>,
    calls: Option<f64>,
    dynamic: Option<f64>,
    /// Dynamic with the NFs' shared entries (the build before per-site
    /// entries).
    shared: Option<f64>,
    tail: Option<f64>,
}

/// The tail-call subject (one object) and the names of its no-op programs;
/// the prog array is filled per N.
struct Tail {
    subject: Subject,
    nops: Vec<String>,
}

impl Tail {
    /// Loads `c/tail_nop.c`, or says why it is left out.
    fn load() -> Option<Tail> {
        let tail = load_c(&tail_nop_object(), None).map(|loaded| Subject {
            name: "tail".into(),
            loaded,
            entry: "tn_entry".into(),
            prepare: None,
        });
        match tail {
            Ok(subject) => Some(Tail {
                subject,
                nops: (0..8).map(|k| format!("tn_nop{k}")).collect(),
            }),
            Err(e) => {
                println!("calls: tail calls left out: {e}");
                None
            }
        }
    }

    /// Fills the prog array so that the entry makes `n` tail calls.
    fn set_n(&self, n: usize) -> Res<()> {
        if n > self.nops.len() {
            return Err(format!("{} no-op programs only", self.nops.len()));
        }
        let names: Vec<&str> = self.nops.iter().take(n).map(String::as_str).collect();
        fill_prog_array(&self.subject.loaded, "tn_jmp", &names)
    }
}

/// Everything measured: the static and dynamic chains (one program per N)
/// and the tail calls.
struct Subjects {
    stat: Vec<(usize, Subject)>,
    calls: Vec<(usize, Subject)>,
    dynamic: Vec<(usize, Subject)>,
    shared: Vec<(usize, Subject)>,
    tail: Option<Tail>,
}

/// Compiles and loads one chain per N with `compile` (static or dynamic
/// mode); a chain that fails is left out with a message.
fn load_chains(mode: &str, compile: fn(&str, &str) -> Res<Program>) -> Vec<(usize, Subject)> {
    let mut out = Vec::new();
    for n in NS {
        match compile(&format!("calls{n}.py"), &script(n))
            .and_then(|(image, entry, w)| Ok((load_compiled(&image, &w)?, entry)))
        {
            Ok((loaded, entry)) => out.push((
                n,
                Subject {
                    name: format!("{mode}/{n}"),
                    loaded,
                    entry,
                    prepare: None,
                },
            )),
            Err(e) => println!("calls: {mode} chain with {n} calls left out: {e}"),
        }
    }
    out
}

/// A static chain without inlining (bpf-to-bpf calls, the "before" of
/// docs/cost.md).
fn compile_static_calls(file: &str, src: &str) -> Res<Program> {
    compile_static_with(file, src, nfkit_lang::link::Inline::Off)
}

/// One criterion benchmark: `s` run on `frame`, timed by the kernel.
fn bench_one(
    g: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    n: usize,
    s: &mut Subject,
    frame: &[u8],
) {
    g.bench_with_input(id, &n, |b, _| {
        b.iter_custom(|iters| {
            let r = s.run_batches(frame, 1, iters.min(u32::MAX as u64) as u32);
            Duration::from_nanos(r.map(|(ns, _)| ns).unwrap_or(0))
        })
    });
}

/// The criterion group `calls`: static/N, dynamic/N, tail/N.
fn run_criterion(c: &mut Criterion, subjects: &mut Subjects, frame: &[u8]) {
    let mut g = c.benchmark_group("calls");
    for (n, s) in subjects.stat.iter_mut() {
        bench_one(&mut g, BenchmarkId::new("static", *n), *n, s, frame);
    }
    for (n, s) in subjects.calls.iter_mut() {
        bench_one(&mut g, BenchmarkId::new("static-calls", *n), *n, s, frame);
    }
    for (n, s) in subjects.dynamic.iter_mut() {
        bench_one(&mut g, BenchmarkId::new("dynamic", *n), *n, s, frame);
    }
    if let Some(t) = subjects.tail.as_mut() {
        for n in NS {
            if t.set_n(n).is_err() {
                continue;
            }
            bench_one(
                &mut g,
                BenchmarkId::new("tail", n),
                n,
                &mut t.subject,
                frame,
            );
        }
    }
    g.finish();
    c.final_summary();
}

/// Rounds of the summary (each: 200k runs of every subject), unless
/// `NFKIT_CALLS_ROUNDS` says otherwise.
const ROUNDS: usize = 9;

fn rounds() -> usize {
    std::env::var("NFKIT_CALLS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ROUNDS)
}

/// Whether `s` takes the whole path (N calls, then PASS); says so when
/// it does not.
fn takes_path(s: &mut Subject, frame: &[u8]) -> bool {
    let code = s.run_batches(frame, 1, 1).map(|(_, c)| c).ok();
    if code != Some(2) {
        println!(
            "calls: {} gave {} instead of PASS: left out",
            s.name,
            code.map_or("an error", xdp_code)
        );
        return false;
    }
    true
}

/// A column of the summary.
#[derive(Clone, Copy)]
enum Col {
    Stat,
    Calls,
    Dynamic,
    Shared,
    Tail,
}

impl Row {
    fn cell(&mut self, c: Col) -> &mut Option<f64> {
        match c {
            Col::Stat => &mut self.stat,
            Col::Calls => &mut self.calls,
            Col::Dynamic => &mut self.dynamic,
            Col::Shared => &mut self.shared,
            Col::Tail => &mut self.tail,
        }
    }
}

/// The summary measurements, one row per N: every subject (and the tail
/// calls at every N) once per round, rounds interleaved so that a slow
/// spell of the machine hits all variants alike; the median per cell.
fn measure_rows(subjects: &mut Subjects, frame: &[u8]) -> Vec<Row> {
    let mut rows: Vec<Row> = NS
        .iter()
        .map(|&n| Row {
            n,
            stat: None,
            calls: None,
            dynamic: None,
            shared: None,
            tail: None,
        })
        .collect();
    // (column, N, subject) of each chain that takes the whole path.
    let mut chains: Vec<(Col, usize, &mut Subject)> = Vec::new();
    for (col, list) in [
        (Col::Stat, &mut subjects.stat),
        (Col::Calls, &mut subjects.calls),
        (Col::Dynamic, &mut subjects.dynamic),
        (Col::Shared, &mut subjects.shared),
    ] {
        for (n, s) in list.iter_mut() {
            if takes_path(s, frame) {
                chains.push((col, *n, s));
            }
        }
    }
    let mut tail_ns: Vec<usize> = Vec::new();
    if let Some(t) = subjects.tail.as_mut() {
        for n in NS {
            if t.set_n(n).is_ok() && takes_path(&mut t.subject, frame) {
                tail_ns.push(n);
            }
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); chains.len() + tail_ns.len()];
    for _ in 0..rounds() {
        for (i, (_, _, s)) in chains.iter_mut().enumerate() {
            if let Ok(ns) = s.ns_per_packet(frame, 1, 1, 200_000) {
                samples[i].push(ns);
            }
        }
        if let Some(t) = subjects.tail.as_mut() {
            for (j, &n) in tail_ns.iter().enumerate() {
                if t.set_n(n).is_err() {
                    continue;
                }
                if let Ok(ns) = t.subject.ns_per_packet(frame, 1, 1, 200_000) {
                    samples[chains.len() + j].push(ns);
                }
            }
        }
    }
    let cells = chains
        .iter()
        .map(|(c, n, _)| (*c, *n))
        .chain(tail_ns.iter().map(|&n| (Col::Tail, n)));
    for ((col, n), v) in cells.zip(samples.iter_mut()) {
        if let Some(r) = rows.iter_mut().find(|r| r.n == n) {
            *r.cell(col) = (!v.is_empty()).then(|| median(v));
        }
    }
    rows
}

/// `v` with one decimal, or `-`.
fn f(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.1}"))
}

/// Prints the summary table: one line per N, then the cost per call
/// (t(N) - t(0)) / N.
fn print_summary(rows: &[Row]) {
    let mut table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.n.to_string(),
                f(r.stat),
                f(r.calls),
                f(r.dynamic),
                f(r.shared),
                f(r.tail),
                ratio(r.stat, r.tail),
                ratio(r.dynamic, r.tail),
            ]
        })
        .collect();
    // Over the largest N measured (the tail calls stop at 8).
    let per_call = |get: &dyn Fn(&Row) -> Option<f64>| {
        let t0 = rows.first().and_then(get)?;
        let last = rows.iter().rev().find(|r| r.n > 0 && get(r).is_some())?;
        Some((get(last)? - t0) / last.n as f64)
    };
    let (ps, pc, pd, pt) = (
        per_call(&|r| r.stat),
        per_call(&|r| r.calls),
        per_call(&|r| r.dynamic),
        per_call(&|r| r.tail),
    );
    let psh = per_call(&|r| r.shared);
    table.push(vec![
        "per call".into(),
        f(ps),
        f(pc),
        f(pd),
        f(psh),
        f(pt),
        ratio(ps, pt),
        ratio(pd, pt),
    ]);
    print_table(
        &format!(
            "N calls to a no-op NF: ns per packet (BPF_PROG_TEST_RUN, median of {} interleaved \
             rounds of 200k runs; per call = (t(N) - t(0)) / N, N = 16, tail calls 8)",
            rounds()
        ),
        &[
            "N",
            "static chain",
            "static, calls",
            "dynamic chain",
            "dynamic, shared entries",
            "tail calls",
            "static/tail",
            "dynamic/tail",
        ],
        &table,
    );
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .configure_from_args();
    if !is_root() {
        println!("calls: skipped (the kernel benchmarks need root)");
        return;
    }
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let frame = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 2000);
    let mut subjects = Subjects {
        stat: load_chains("static", compile_static),
        calls: load_chains("static-calls", compile_static_calls),
        dynamic: load_chains("dynamic", compile_dynamic),
        shared: load_chains("dynamic-shared", compile_dynamic_shared),
        tail: Tail::load(),
    };
    // NFKIT_CALLS_QUICK=1: the summary only.
    if !std::env::var("NFKIT_CALLS_QUICK").is_ok_and(|v| v == "1") {
        run_criterion(&mut c, &mut subjects, &frame);
    }
    // Summary: medians of interleaved rounds of 200k runs each.
    let rows = measure_rows(&mut subjects, &frame);
    print_summary(&rows);
}
