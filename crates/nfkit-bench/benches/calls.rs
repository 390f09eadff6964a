//! What an NF call costs: a chain making N calls to a no-op NF
//! (`c/bnop.c`: `nop(x)` gives x back) compiled by nfkit-lang into one
//! program (static mode: bpf-to-bpf calls), against N no-op XDP programs
//! tail-calling each other (`c/tail_nop.c`), and the same chain in
//! dynamic mode (each NF call is a tail call to the NF's dynamic entry
//! and one back to the chain's next segment), for N = 0, 1, 2, 4, 8.
//!
//! ns per packet are the kernel's own `BPF_PROG_TEST_RUN` times (repeat
//! runs on one 64-byte UDP frame). The static chain's time includes
//! nfkit's classifier (parse once into the info block, statistics),
//! which the bare tail-call programs do not have, so the summary also
//! gives the cost per call: (t(8) - t(0)) / 8. Needs root (skipped
//! otherwise).

use criterion::{BenchmarkId, Criterion};
use nfkit_bench::*;
use std::time::Duration;

const NS: [usize; 5] = [0, 1, 2, 4, 8];

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

struct Row {
    n: usize,
    stat: Option<f64>,
    dynamic: Option<f64>,
    tail: Option<f64>,
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

    // Static chains, one program per N.
    let mut stat: Vec<(usize, Subject)> = Vec::new();
    for n in NS {
        match compile_static(&format!("calls{n}.py"), &script(n))
            .and_then(|(image, entry, w)| Ok((load_compiled(&image, &w)?, entry)))
        {
            Ok((loaded, entry)) => stat.push((
                n,
                Subject {
                    name: format!("static/{n}"),
                    loaded,
                    entry,
                    prepare: None,
                },
            )),
            Err(e) => println!("calls: static chain with {n} calls left out: {e}"),
        }
    }
    // Dynamic chains, one program per N.
    let mut dynamic: Vec<(usize, Subject)> = Vec::new();
    for n in NS {
        match compile_dynamic(&format!("calls{n}.py"), &script(n))
            .and_then(|(image, entry, w)| Ok((load_compiled(&image, &w)?, entry)))
        {
            Ok((loaded, entry)) => dynamic.push((
                n,
                Subject {
                    name: format!("dynamic/{n}"),
                    loaded,
                    entry,
                    prepare: None,
                },
            )),
            Err(e) => println!("calls: dynamic chain with {n} calls left out: {e}"),
        }
    }
    // Tail calls: one object, the prog array filled per N.
    let tail = load_c(&tail_nop_object(), None).map(|loaded| Subject {
        name: "tail".into(),
        loaded,
        entry: "tn_entry".into(),
        prepare: None,
    });
    let mut tail = match tail {
        Ok(t) => Some(t),
        Err(e) => {
            println!("calls: tail calls left out: {e}");
            None
        }
    };
    let nops: Vec<String> = (0..8).map(|k| format!("tn_nop{k}")).collect();
    let set_n = |t: &Subject, n: usize| {
        let names: Vec<&str> = nops.iter().take(n).map(String::as_str).collect();
        fill_prog_array(&t.loaded, "tn_jmp", &names)
    };

    let mut g = c.benchmark_group("calls");
    for (n, s) in stat.iter_mut() {
        g.bench_with_input(BenchmarkId::new("static", *n), n, |b, _| {
            b.iter_custom(|iters| {
                let r = s.run_batches(&frame, 1, iters.min(u32::MAX as u64) as u32);
                Duration::from_nanos(r.map(|(ns, _)| ns).unwrap_or(0))
            })
        });
    }
    for (n, s) in dynamic.iter_mut() {
        g.bench_with_input(BenchmarkId::new("dynamic", *n), n, |b, _| {
            b.iter_custom(|iters| {
                let r = s.run_batches(&frame, 1, iters.min(u32::MAX as u64) as u32);
                Duration::from_nanos(r.map(|(ns, _)| ns).unwrap_or(0))
            })
        });
    }
    if let Some(t) = tail.as_mut() {
        for n in NS {
            if set_n(t, n).is_err() {
                continue;
            }
            g.bench_with_input(BenchmarkId::new("tail", n), &n, |b, _| {
                b.iter_custom(|iters| {
                    let r = t.run_batches(&frame, 1, iters.min(u32::MAX as u64) as u32);
                    Duration::from_nanos(r.map(|(ns, _)| ns).unwrap_or(0))
                })
            });
        }
    }
    g.finish();
    c.final_summary();

    // Summary: medians of 7 rounds of 200k runs each.
    // Every variant must take the whole path: N calls, then PASS.
    let measure = |s: &mut Subject| {
        let code = s.run_batches(&frame, 1, 1).map(|(_, c)| c).ok();
        if code != Some(2) {
            println!(
                "calls: {} gave {} instead of PASS: left out",
                s.name,
                code.map_or("an error", xdp_code)
            );
            return None;
        }
        s.ns_per_packet(&frame, 7, 1, 200_000).ok()
    };
    let mut rows: Vec<Row> = NS
        .iter()
        .map(|&n| Row {
            n,
            stat: None,
            dynamic: None,
            tail: None,
        })
        .collect();
    for (n, s) in stat.iter_mut() {
        if let Some(r) = rows.iter_mut().find(|r| r.n == *n) {
            r.stat = measure(s);
        }
    }
    for (n, s) in dynamic.iter_mut() {
        if let Some(r) = rows.iter_mut().find(|r| r.n == *n) {
            r.dynamic = measure(s);
        }
    }
    if let Some(t) = tail.as_mut() {
        for r in rows.iter_mut() {
            if set_n(t, r.n).is_ok() {
                r.tail = measure(t);
            }
        }
    }
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.n.to_string(),
                f(r.stat),
                f(r.dynamic),
                f(r.tail),
                ratio(r.stat, r.tail),
                ratio(r.dynamic, r.tail),
            ]
        })
        .collect();
    let per_call = |get: &dyn Fn(&Row) -> Option<f64>| {
        let t0 = rows.first().and_then(get)?;
        let t8 = rows.last().and_then(get)?;
        Some((t8 - t0) / 8.0)
    };
    let (ps, pd, pt) = (
        per_call(&|r| r.stat),
        per_call(&|r| r.dynamic),
        per_call(&|r| r.tail),
    );
    table.push(vec![
        "per call".into(),
        f(ps),
        f(pd),
        f(pt),
        ratio(ps, pt),
        ratio(pd, pt),
    ]);
    print_table(
        "N calls to a no-op NF: ns per packet (BPF_PROG_TEST_RUN, median of 7 x 200k runs; \
         per call = (t(8) - t(0)) / 8)",
        &[
            "N",
            "static chain",
            "dynamic chain",
            "tail calls",
            "static/tail",
            "dynamic/tail",
        ],
        &table,
    );
}
