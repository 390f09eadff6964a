//! What a match-action table costs (docs/language.md, "Pipelines"): a
//! chain applying one table keyed on `ip.dst` (exact: a hash map; lpm:
//! an LPM trie of /24 prefixes; ternary: rules scanned through
//! `bpf_loop`) holding 16, 1k and 64k entries (ternary: 16, 1k and 4096,
//! its most), against the same chain without the table, on one 64-byte
//! UDP frame that hits an entry (ternary: the last rule, every rule is
//! scanned anyway).
//!
//! ns per packet in nfkit's VM (interpreter and JIT; the thread's CPU
//! time of runs through one runner, preemptions left out) and in the kernel (`BPF_PROG_TEST_RUN` with
//! repeat, the kernel's own time; root only), each the median of
//! 15 interleaved rounds of about 20 ms (NFKIT_BENCH_QUICK=1: 3 of 10 ms), with the ratio to
//! the chain without a table on the same engine. The entries are
//! written by the control plane ([`nfkit_lang::table::Table::writes`])
//! before the runs. Every variant is checked to PASS the frame (a hit)
//! first. Table and load average to `target/nfkit-bench/tables.md`.

use nfkit_bench::*;
use nfkit_lang::table::{Entry, KeyMatch};
use nfkit_vm::{Engine, EngineUse, PacketCtx, RunOptions, Vm, VmConfig};
use std::fmt::Write as _;
use std::time::Duration;

/// The chain without a table.
const NONE: &str = "from nf.classify import every_packet\n\
def main() -> u64:\n\
\x20   return PASS\n\
every_packet(main)\n\
attach(\"eth0\", \"xdp\")\n";

/// The chain applying table T (match kind `kind`, `size` entries): a
/// hit (NoAction, value 0) passes, a miss drops.
fn with_table(kind: &str, size: u32) -> String {
    format!(
        "from nf.classify import every_packet\n\
         T = Table(keys={{\"ip.dst\": \"{kind}\"}}, actions=[NoAction, DROP], size={size}, default=DROP)\n\
         def main() -> u64:\n\
         \x20   if T.apply() == 0:\n\
         \x20       return PASS\n\
         \x20   return DROP\n\
         every_packet(main)\n\
         attach(\"eth0\", \"xdp\")\n"
    )
}

/// Entry `i`'s destination: 10.0.0.0 + i (lpm: the /24 10.i.0 / 24 as
/// 10.(i >> 8).(i & 255).0).
fn dst(kind: &str, i: u32) -> u32 {
    if kind == "lpm" {
        0x0a00_0000 | (i << 8)
    } else {
        0x0a00_0000 + i
    }
}

/// The compiled chain with `n` entries in T (NoAction each): the Image,
/// its entry and the control plane's writes.
fn program(kind: &str, n: u32) -> Res<Program> {
    let src = with_table(kind, n);
    let c = nfkit_lang::compile(&format!("{kind}{n}.py"), &src, &Default::default())
        .map_err(|e| format!("{e}"))?;
    let mut t = c
        .program
        .tables
        .first()
        .cloned()
        .ok_or("the script has no table")?;
    t.entries = (0..n)
        .map(|i| Entry {
            keys: vec![match kind {
                "lpm" => KeyMatch {
                    value: dst(kind, i) as u64,
                    mask: 0xffff_ff00,
                    prefix: 24,
                },
                _ => KeyMatch {
                    value: dst(kind, i) as u64,
                    mask: 0xffff_ffff,
                    prefix: 32,
                },
            }],
            action: 0,
            arg: 0,
            line: 0,
        })
        .collect();
    let mut writes = c.control_plane();
    writes.extend(t.writes());
    let entry = c.entry().ok_or("no classifier")?.to_string();
    Ok((c.image, entry, writes))
}

/// The frame that hits entry `i` of a `kind` table.
fn frame(kind: &str, i: u32) -> Vec<u8> {
    let host = if kind == "lpm" { 7 } else { 0 };
    let d = dst(kind, i) | host;
    udp4([198, 18, 0, 1], d.to_be_bytes(), 1000, 2000)
}

/// CPU time this thread used, ns (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One measured cell: a variant on one engine.
enum Bench {
    Vm { vm: Vm, entry: String },
    Kernel(Subject),
}

impl Bench {
    /// The VM with the program loaded on `engine` and its writes applied.
    fn vm(p: &Program, engine: Engine) -> Res<Bench> {
        let (image, entry, writes) = p;
        let vm = Vm::new(image, VmConfig::kernel().with_engine(engine)).map_err(err("load"))?;
        for (m, k, v) in writes {
            vm.map(m)
                .ok_or_else(|| format!("no map `{m}`"))?
                .update(k, v, 0)
                .map_err(err(m))?;
        }
        Ok(Bench::Vm {
            vm,
            entry: entry.clone(),
        })
    }

    /// The program loaded into the kernel with its writes applied.
    fn kernel(p: &Program) -> Res<Bench> {
        let (image, entry, writes) = p;
        Ok(Bench::Kernel(Subject {
            name: entry.clone(),
            loaded: load_compiled(image, writes)?,
            entry: entry.clone(),
            prepare: None,
        }))
    }

    /// What runs a VM entry (`jit`, or `interp` and why).
    fn engine(&self) -> String {
        match self {
            Bench::Vm { vm, entry } => match vm.engine(entry.as_str()) {
                Some(EngineUse::Jit) => "jit".into(),
                Some(EngineUse::Interp) | None => "interp".into(),
                Some(other) => format!("interp ({other:?})"),
            },
            Bench::Kernel(_) => "kernel".into(),
        }
    }

    /// ns per run of `n` runs on `fr`; an error unless the frame PASSes.
    fn run(&mut self, fr: &[u8], n: u64) -> Res<f64> {
        match self {
            Bench::Vm { vm, entry } => {
                let mut runner = vm.runner();
                let opts = RunOptions::default();
                let mut pkt = fr.to_vec();
                let t = thread_cpu_ns();
                for _ in 0..n {
                    pkt.clear();
                    pkt.extend_from_slice(fr);
                    let o = runner.run_packet(entry.as_str(), &mut pkt, PacketCtx::Xdp, &opts);
                    let code = o.result.map_err(err("run"))?;
                    if code != 2 {
                        return Err(format!("gave {} instead of PASS", xdp_code(code as u32)));
                    }
                }
                Ok(thread_cpu_ns().saturating_sub(t) as f64 / n as f64)
            }
            Bench::Kernel(s) => {
                let (ns, code) = s.run_batches(fr, 1, n.min(u32::MAX as u64) as u32)?;
                if code != 2 {
                    return Err(format!("gave {} instead of PASS", xdp_code(code)));
                }
                Ok(ns as f64 / n as f64)
            }
        }
    }
}

/// A cell of the table: (row, column), what runs, the frame, runs per
/// round and the rounds' ns per packet.
struct Cell<'a> {
    row: usize,
    col: usize,
    bench: Bench,
    frame: &'a [u8],
    runs: u64,
    samples: Vec<f64>,
}

/// One row: its label, entries, (interp, jit, kernel) ns, and what ran
/// the JIT column.
struct Row {
    table: String,
    entries: String,
    cells: [Option<f64>; 3],
    jit_used: String,
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let quick = std::env::var("NFKIT_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let (rounds, budget) = if quick {
        (3, Duration::from_millis(10))
    } else {
        (15, Duration::from_millis(20))
    };
    // Before pinning (which narrows what this thread may use).
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let root = is_root();
    if root {
        let _ = nfkit_kernel::pin_thread_to_cpu(0);
    }
    let mut cases: Vec<(String, String, Res<Program>, Vec<u8>)> = vec![(
        "none".into(),
        "-".into(),
        compile_static("none.py", NONE),
        frame("exact", 0),
    )];
    for kind in ["exact", "lpm", "ternary"] {
        let sizes: [u32; 3] = if kind == "ternary" {
            [16, 1024, nfkit_lang::table::MAX_TERNARY]
        } else {
            [16, 1024, 65536]
        };
        for n in sizes {
            let hit = if kind == "ternary" { n - 1 } else { n / 2 };
            cases.push((
                kind.into(),
                n.to_string(),
                program(kind, n),
                frame(kind, hit),
            ));
        }
    }
    // Load every cell, check it passes the frame and size its rounds;
    // then interleaved rounds (every cell once per round), so the load of
    // a shared machine falls on all of them alike.
    let mut rows = Vec::new();
    let mut cells: Vec<Cell> = Vec::new();
    for (table, entries, p, fr) in &cases {
        let label = format!("{table}/{entries}");
        let row = rows.len();
        rows.push(Row {
            table: table.clone(),
            entries: entries.clone(),
            cells: [None; 3],
            jit_used: String::new(),
        });
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                println!("tables: {label} left out: {e}");
                continue;
            }
        };
        let mut benches = vec![
            (0, Bench::vm(p, Engine::Interp)),
            (1, Bench::vm(p, Engine::Jit)),
        ];
        if root {
            benches.push((2, Bench::kernel(p)));
        }
        for (col, b) in benches {
            let first = b.and_then(|mut b| {
                let ns = b.run(fr, 8)?;
                Ok((b, ns))
            });
            match first {
                Ok((bench, ns)) => {
                    if col == 1 {
                        rows[row].jit_used = bench.engine();
                    }
                    let runs = (budget.as_nanos() as f64 / ns.max(1.0)).clamp(8.0, 5e6) as u64;
                    cells.push(Cell {
                        row,
                        col,
                        bench,
                        frame: fr,
                        runs,
                        samples: Vec::new(),
                    });
                }
                Err(e) => println!("tables: {label} column {col}: {e}"),
            }
        }
    }
    for _ in 0..rounds {
        for c in cells.iter_mut() {
            match c.bench.run(c.frame, c.runs) {
                Ok(ns) => c.samples.push(ns),
                Err(e) => println!("tables: row {} column {}: {e}", c.row, c.col),
            }
        }
    }
    for c in cells.iter_mut() {
        if !c.samples.is_empty() {
            rows[c.row].cells[c.col] = Some(median(&mut c.samples));
        }
    }
    let base = rows.first().map(|r| r.cells).unwrap_or([None; 3]);
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Match-action tables: ns per packet\n\n\
         One table on `ip.dst` (a hit: NoAction, then PASS) against the same chain without \
         it; median of {rounds} interleaved rounds of ~{} ms per cell; x = ratio to no table on the same engine. \
         VM: the thread's CPU time of runs through one runner; kernel: BPF_PROG_TEST_RUN with repeat{}. \
         Load average at the end: {} ({cpus} CPUs){}\n\n\
         | table | entries | VM interp ns | x | VM JIT ns | x | kernel ns | x |\n\
         |---|---|---|---|---|---|---|---|",
        budget.as_millis(),
        if root { "" } else { " (not root: left out)" },
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        if quick { "; quick mode" } else { "" },
    );
    for r in &rows {
        let jit = if r.jit_used == "jit" || r.jit_used.is_empty() {
            f(r.cells[1])
        } else {
            format!("{} ({})", f(r.cells[1]), r.jit_used)
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.table,
            r.entries,
            f(r.cells[0]),
            ratio(r.cells[0], base[0]),
            jit,
            ratio(r.cells[1], base[1]),
            f(r.cells[2]),
            ratio(r.cells[2], base[2]),
        );
    }
    print!("\n{md}");
    nfkit_corpus::write_bench_report("tables.md", &md);
}
