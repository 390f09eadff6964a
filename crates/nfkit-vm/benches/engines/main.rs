//! Every engine on the same programs, in one run (`make bench`): nfkit's
//! JIT and interpreter, rbpf's JIT and interpreter, DPDK rte_bpf's JIT and
//! interpreter, and native C doing the same work, against the goals of
//! issue 14.
//!
//! Programs (eBPF from `benches/common`, C from `native.c`):
//! * (a) `parse`: the ~30-instruction Ethernet/IPv4/TCP-UDP parser that
//!   drops four destination ports, on eight TCP and UDP frames;
//! * (b) `alu_loop`: 1000 rounds of xorshift mixing;
//! * (c) `pkt_sum`: the 16-bit sum of a 1500-byte packet;
//! * `exit_only`: `r0 = 2; exit`, the fixed cost of a run (the issue's
//!   interpreter goals: fixed cost and ns per instruction on (b));
//! * (d) `ddos legit` / `ddos flood`: the DDoS chain with its maps (nfkit
//!   only), and `helpers xN`: N calls of a trivial helper, N the chain's
//!   helper calls on that path (what rbpf, which has no maps, is compared
//!   with).
//!
//! Interleaved rounds: each round runs one batch (about 20 ms; 2 ms in
//! quick mode) of every engine on every program in turn, so drift on a
//! shared machine spreads over all of them; the table gives the median
//! ns per run over the rounds (per packet: a batch cycles through the
//! program's packets). Every engine's results are checked against the
//! others' before anything is timed (a row that disagrees is dropped and
//! named). The table is printed and written to
//! `target/nfkit-bench/vm-engines.md` and `.json`.
//!
//! `NFKIT_BENCH_QUICK=1`: five rounds of short batches (a few seconds).
//! DPDK's rte_bpf has rows where libdpdk-dev is installed and its
//! validator accepts the program ([`DPDK`]); uBPF has none ([`UBPF`]).

#[path = "../common/mod.rs"]
mod common;
mod ddos;
mod dpdk;
mod native;
mod report;
mod rows;

use common::*;
use rows::{nfkit_asm, rbpf_rows, Row, HELPER_ID};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Why uBPF has no rows.
pub const UBPF: &str =
    "uBPF: not available (no Debian package; the crates.io `ubpf`/`ubpf-sys` 0.1 \
     bindings (2018, AGPL-3.0) build only through a musl cross toolchain and their own bindgen \
     wrapper; the only other way is vendoring its source, which nfkit does not do)";
/// How DPDK's rte_bpf runs the programs.
pub const DPDK: &str = "DPDK rte_bpf (libdpdk-dev, called through a C shim): its validator \
     follows packet pointers by value ranges from an rte_mbuf, not by data_end checks, so packet \
     programs start with an mbuf prologue (5 instructions instead of 2; the packet is not copied), \
     and it refuses loops: no DPDK rows for (b) and (c)";

/// One program and the engines that run it.
pub struct Bench {
    /// `(a) parse`, ...
    pub name: String,
    pub packets: Vec<Vec<u8>>,
    pub rows: Vec<Row>,
    /// Whether every engine must give the same r0 (not the DDoS chain,
    /// whose sampling draws random numbers).
    pub agree: bool,
    /// Instructions nfkit executes per run (mean over the packets).
    pub insns: f64,
    /// Rows left out, and why.
    pub notes: Vec<String>,
}

impl Bench {
    fn new(name: impl Into<String>, packets: Vec<Vec<u8>>) -> Bench {
        Bench {
            name: name.into(),
            packets,
            rows: Vec::new(),
            agree: true,
            insns: 0.0,
            notes: Vec::new(),
        }
    }

    /// Adds `rows`, or notes why they are missing.
    fn add(&mut self, what: &str, rows: Result<Vec<Row>, String>) {
        match rows {
            Ok(r) => self.rows.extend(r),
            Err(e) => self.notes.push(format!("{what}: {e}")),
        }
    }

    /// Adds the native C row.
    fn native(&mut self, native: &Result<native::Native, String>, run: rows::RunFn) {
        match native {
            Ok(_) => self.rows.push(Row::new("native C", "clang -O2", run)),
            Err(e) => self.notes.push(format!("native C: {e}")),
        }
    }
}

/// The engines besides nfkit's own that run assembled programs.
struct Others {
    native: Result<native::Native, String>,
    dpdk: Result<dpdk::Dpdk, String>,
}

/// An assembled program for nfkit, rbpf and DPDK (`{CTX}` filled in for
/// each; `packet`: the program reads the packet through it).
fn asm_bench(name: &str, text: &str, packets: Vec<Vec<u8>>, packet: bool, o: &Others) -> Bench {
    let mut b = Bench::new(name, packets);
    let ours = asm(&text.replace("{CTX}", NFKIT_CTX));
    b.insns = insns_per_run(&ours, &b.packets);
    b.add("nfkit", nfkit_asm(&ours));
    b.add("rbpf", rbpf_rows(&asm(&text.replace("{CTX}", RBPF_CTX))));
    if let Ok(d) = &o.dpdk {
        let insns = asm(&text.replace("{CTX}", &d.ctx()));
        b.add("DPDK", d.rows(&insns, packet));
    }
    b
}

/// A native row over `(data, data_end)`.
fn packet_fn(f: Option<native::PacketFn>) -> rows::RunFn {
    Box::new(move |p: &mut Vec<u8>| {
        let r = p.as_ptr_range();
        f.map_or(u64::MAX, |f| f(black_box(r.start), black_box(r.end)))
    })
}

/// A native row of a function of one argument.
fn arg_fn(f: Option<native::ArgFn>, arg: u64) -> rows::RunFn {
    Box::new(move |_: &mut Vec<u8>| f.map_or(u64::MAX, |f| f(black_box(arg))))
}

/// Every program with every engine that can run it.
fn benches(o: &Others) -> Vec<Bench> {
    let native = &o.native;
    let nat = native.as_ref().ok().copied();
    let mut out = Vec::new();
    let mut parse = asm_bench("(a) parse", PARSER, parse_packets(), true, o);
    parse.native(native, packet_fn(nat.map(|n| n.parse)));
    out.push(parse);
    let mut alu = asm_bench("(b) alu_loop", ALU_LOOP, vec![vec![0u8; 64]], false, o);
    alu.native(native, arg_fn(nat.map(|n| n.alu), 0x1234_5678));
    out.push(alu);
    let sum_packets = (0..2u8)
        .map(|k| (0..1500).map(|i| (i * 7 + k as usize) as u8).collect())
        .collect();
    let mut sum = asm_bench("(c) pkt_sum", PKT_SUM, sum_packets, true, o);
    sum.native(native, packet_fn(nat.map(|n| n.pkt_sum)));
    out.push(sum);
    out.push(asm_bench(
        "exit_only",
        EXIT_ONLY,
        vec![vec![0u8; 64]],
        false,
        o,
    ));
    match ddos::load_paths() {
        Err(e) => {
            let mut b = Bench::new("(d) ddos", vec![vec![0u8; 64]]);
            b.notes.push(format!("DDoS chain: {e}"));
            out.push(b);
        }
        Ok(paths) => {
            for p in paths {
                let mut b = Bench::new(format!("(d) ddos {}", p.name), vec![p.frame]);
                b.agree = false;
                b.rows = p.rows;
                b.insns = p.insns as f64;
                b.notes.push(format!(
                    "verdict {}, {} helper calls per run",
                    p.verdict, p.helper_calls
                ));
                out.push(b);
                let n = p.helper_calls;
                let mut h = asm_bench(
                    &format!("(d) helpers x{n} ({})", p.name),
                    &helper_calls(n, HELPER_ID),
                    vec![vec![0u8; 64]],
                    false,
                    o,
                );
                h.native(native, arg_fn(nat.map(|n| n.helper_calls), n as u64));
                out.push(h);
            }
        }
    }
    out
}

/// Runs every row once per packet: rows that fail or disagree with
/// nfkit's interpreter are dropped (and named).
fn check(benches: &mut [Bench]) {
    for b in benches.iter_mut() {
        let mut packets = b.packets.clone();
        let results: Vec<Vec<u64>> = b
            .rows
            .iter_mut()
            .map(|r| packets.iter_mut().map(|p| (r.run)(p)).collect())
            .collect();
        // The interpreter is the reference (the JIT is what is checked).
        let at = b
            .rows
            .iter()
            .position(|r| r.column == "nfkit interp")
            .unwrap_or(0);
        let reference = results.get(at).cloned().unwrap_or_default();
        let first = b.rows.get(at).map_or("-", |r| r.column);
        let mut keep = Vec::new();
        for (row, res) in std::mem::take(&mut b.rows).into_iter().zip(results) {
            if res.contains(&u64::MAX) {
                b.notes.push(format!("{}: the run failed", row.column));
            } else if b.agree && res != reference {
                b.notes.push(format!(
                    "{}: r0 {res:?} differs from {}'s {reference:?}",
                    row.column, first
                ));
            } else {
                keep.push(row);
            }
        }
        b.rows = keep;
    }
}

/// nfkit's instructions per run of `insns` on `packets` (interpreter,
/// mean over the packets).
fn insns_per_run(insns: &[nfkit_isa::Insn], packets: &[Vec<u8>]) -> f64 {
    let Ok(vm) = rows::nfkit_vm(insns, nfkit_vm::Engine::Interp) else {
        return f64::NAN;
    };
    let opts = nfkit_vm::RunOptions::default();
    let total: u64 = packets
        .iter()
        .map(|p| {
            let ctx = nfkit_vm::Context::Xdp(nfkit_vm::XdpMd::new(p));
            vm.run(0usize, ctx, &opts).insns
        })
        .sum();
    total as f64 / packets.len().max(1) as f64
}

/// Time of `reps` passes of `row` over `packets`.
fn batch(row: &mut Row, packets: &mut [Vec<u8>], reps: u64) -> Duration {
    let t = Instant::now();
    for _ in 0..reps {
        for p in packets.iter_mut() {
            black_box((row.run)(black_box(p)));
        }
    }
    t.elapsed()
}

/// Passes over the packets that take about `target`.
fn calibrate(row: &mut Row, packets: &mut [Vec<u8>], target: Duration) -> u64 {
    let mut reps = 1u64;
    loop {
        let d = batch(row, packets, reps);
        if d >= target / 4 || reps >= 1 << 30 {
            let scale = target.as_secs_f64() / d.as_secs_f64().max(1e-9);
            return ((reps as f64 * scale) as u64).max(1);
        }
        reps *= 2;
    }
}

/// Interleaved rounds: every row of every bench, one batch each, per round.
fn measure(benches: &mut [Bench], rounds: usize, target: Duration) {
    let mut reps: Vec<Vec<u64>> = Vec::new();
    for b in benches.iter_mut() {
        let mut packets = b.packets.clone();
        reps.push(
            b.rows
                .iter_mut()
                .map(|r| calibrate(r, &mut packets, target))
                .collect(),
        );
    }
    for _ in 0..rounds {
        for (b, reps) in benches.iter_mut().zip(&reps) {
            let mut packets = b.packets.clone();
            let runs = packets.len() as f64;
            for (row, &n) in b.rows.iter_mut().zip(reps) {
                let d = batch(row, &mut packets, n);
                row.samples.push(d.as_nanos() as f64 / (n as f64 * runs));
            }
        }
    }
}

fn main() {
    let quick = std::env::var("NFKIT_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let (rounds, target) = if quick {
        (5, Duration::from_millis(2))
    } else {
        (15, Duration::from_millis(20))
    };
    let out = report::out_dir();
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("engines: cannot create {}: {e}", out.display());
        std::process::exit(1);
    }
    let out = out.canonicalize().unwrap_or(out);
    let others = Others {
        native: native::load(&out),
        dpdk: dpdk::load(&out),
    };
    let mut benches = benches(&others);
    check(&mut benches);
    measure(&mut benches, rounds, target);
    let notes = vec![
        UBPF.to_string(),
        match &others.dpdk {
            Ok(_) => DPDK.to_string(),
            Err(e) => format!("DPDK rte_bpf: not available ({e})"),
        },
    ];
    let r = report::Report::new(&benches, rounds, target, quick, notes);
    println!("\n{}", r.markdown());
    if let Err(e) = r.write(&out) {
        eprintln!("engines: {e}");
        std::process::exit(1);
    }
}
