//! The DDoS example (`examples/ddos.py`) four ways in the kernel:
//! * hand C: `examples/c/ddos.c`, the same logic written by hand as one
//!   XDP program (the baseline of the ratios);
//! * static chain: the script compiled by nfkit-lang, classifier, chain
//!   and NFs linked into one program and inlined into one function
//!   (docs/cost.md);
//! * static, calls: the same without inlining (bpf-to-bpf calls to the
//!   dispatcher, the chain and each NF), the "before" of docs/cost.md;
//! * dynamic chain: the script compiled for dynamic mode (segments joined
//!   by one constant-key tail call per NF call through `nfkit_progs`,
//!   each segment running the NF of the call site before it, the
//!   per-program passes after inlining); also without those passes ("no
//!   passes") and with the NFs' shared entries, not inlined ("shared
//!   entries": two tail calls per NF call);
//! * tail calls: `c/ddos_tail.c`, the logic by hand as a classic
//!   tail-call pipeline (parse, blacklist, destination bucket, pair bucket).
//!
//! Per-packet cost: the kernel's own `BPF_PROG_TEST_RUN` times, repeat
//! runs of one 64-byte UDP frame (real clock, nothing pinned), on two
//! paths:
//! * legit: a source that is not blacklisted, to a destination whose
//!   bucket has tokens (PASS): blacklist miss, destination bucket taken.
//!   The bucket is charged with some 4.6e9 tokens first (a map write),
//!   so one long run stays in profile (a test run costs milliseconds of
//!   wall time, so refilling through the clock between short runs would
//!   be slow);
//! * flood: a blacklisted source (DROP, one packet in 10 REDIRECT to the
//!   collector): blacklist hit, per-flow sampling counter. The source
//!   blacklists itself with 100 packets before each measurement.
//!
//! Throughput: each program attached in the driver (native XDP) to the
//! receiving end of a veth pair between two namespaces, nfkit's own
//! AF_PACKET sender blasting four flooding sources at one destination
//! from the other end for 1.5 s with the real clock; Mpps = frames the
//! receiving veth counted per second. The sender and the XDP program
//! share a CPU (the veth's NAPI runs where the frame was sent), so these
//! rates are (send + XDP) per frame, and the differences between the
//! programs are diluted by the sender's own cost. So the table also
//! gives each program's own run time per packet under that traffic
//! (`kernel.bpf_stats_enabled` switched on for the run, the entry
//! program's run_time_ns / run_cnt, which include its tail calls).
//!
//! Needs root; skipped otherwise.
//!
//! Environment (to compare builds of other trees in one run):
//! * `NFKIT_DDOS_SAVE=PATH`: writes the static chain's object (the
//!   inlined Image as an ELF file) to PATH and exits without measuring;
//! * `NFKIT_DDOS_BASELINE=LABEL=PATH[,LABEL=PATH...]`: loads each saved
//!   object (libbpf, the control-plane writes of this tree's compile) as
//!   a variant `static, LABEL`, and this tree's static chain through the
//!   same object path as `static, this tree (object)`, so that the rows
//!   differ in their code only;
//! * `NFKIT_DDOS_QUICK=1`: the per-packet cost and code tables only (no
//!   criterion groups, no veth throughput);
//! * `NFKIT_DDOS_ROUNDS=N`: interleaved rounds of the cost table (15).
//!
//! The cost table comes twice: the medians of the rounds (the figures
//! the goals are judged on), then their interquartile means, which
//! resolve below the kernel's whole-ns time per run (for comparing two
//! builds in one run).

use criterion::{BenchmarkId, Criterion};
use nfkit_bench::*;
use std::time::Duration;

/// Tokens (in 10^-9 units) written into a legit destination's bucket:
/// 2^62, some 4.6e9 packets' worth, so a long run stays in profile with
/// the real clock.
const CHARGE: u64 = 1 << 62;

/// Where a variant keeps its destination buckets, to charge one.
enum Buckets {
    /// nfkit's `nf_meter_tb_dst`: key {addr[16], rate u32, burst u32}.
    Nfkit(nfkit_kernel::KMap),
    /// `dst_buckets` of the hand C and the tail calls (examples/c/ddos_common.h): key addr[16].
    Addr(nfkit_kernel::KMap),
    Unknown,
}

impl Buckets {
    /// Fills the bucket of IPv4 destination `dst` (value: lock, pad,
    /// tokens, last_ns).
    fn charge(&self, dst: [u8; 4]) -> Res<()> {
        let mut addr = vec![0u8; 10];
        addr.extend([0xff, 0xff]);
        addr.extend(dst);
        let mut value = vec![0u8; 8];
        value.extend(CHARGE.to_le_bytes());
        value.extend(0u64.to_le_bytes());
        let (map, key) = match self {
            Buckets::Nfkit(m) => {
                let mut k = addr;
                k.extend(100u32.to_le_bytes());
                k.extend(20u32.to_le_bytes());
                (m, k)
            }
            Buckets::Addr(m) => (m, addr),
            Buckets::Unknown => return Err("no known bucket map".into()),
        };
        map.update(&key, &value, 0).map_err(err("bucket"))
    }
}

struct Variant {
    name: String,
    subject: Subject,
    buckets: Buckets,
    /// Wall time of loading (verification included), ms.
    load_ms: f64,
}

fn variant(name: &str, (loaded, load_ms): (nfkit_kernel::Loaded, f64), entry: &str) -> Variant {
    let buckets = if let Some(m) = loaded.map("nf_meter_tb_dst") {
        Buckets::Nfkit(m)
    } else if let Some(m) = loaded.map("dst_buckets") {
        Buckets::Addr(m)
    } else {
        Buckets::Unknown
    };
    Variant {
        name: name.to_string(),
        subject: Subject {
            name: name.to_string(),
            loaded,
            entry: entry.to_string(),
            prepare: None,
        },
        buckets,
        load_ms,
    }
}

fn hand_c() -> Res<Variant> {
    let obj = hand_c_object().ok_or("examples/c/ddos.c is not there (or did not compile)")?;
    let (loaded, ms) = timed(|| load_c(&obj, None))?;
    let entry = loaded
        .progs()
        .iter()
        .find(|p| p.prog_type() == nfkit_object::ProgType::Xdp)
        .map(|p| p.name().to_string())
        .ok_or("examples/c/ddos.c has no XDP program")?;
    Ok(variant("hand C", (loaded, ms), &entry))
}

fn static_chain(inline: nfkit_lang::link::Inline) -> Res<Variant> {
    let src = std::fs::read_to_string(examples_dir().join("ddos.py")).map_err(err("ddos.py"))?;
    let (image, entry, writes) = compile_static_with("ddos.py", &src, inline)?;
    let name = match inline {
        nfkit_lang::link::Inline::On => "static chain",
        nfkit_lang::link::Inline::Off => "static, calls",
        nfkit_lang::link::Inline::NoPasses => "static, no passes",
    };
    Ok(variant(
        name,
        timed(|| load_compiled(&image, &writes))?,
        &entry,
    ))
}

/// The static chain of this tree as an ELF object (`NFKIT_DDOS_SAVE`).
fn save_static(path: &str) -> Res<()> {
    let src = std::fs::read_to_string(examples_dir().join("ddos.py")).map_err(err("ddos.py"))?;
    let (image, _, _) = compile_static_with("ddos.py", &src, nfkit_lang::link::Inline::On)?;
    let bytes = nfkit_object::write_object(&image).map_err(err("write object"))?;
    std::fs::write(path, bytes).map_err(err(path))
}

/// A saved static chain object (`NFKIT_DDOS_BASELINE`), or this tree's
/// own written to a temporary file when `path` is None, loaded through
/// libbpf with this tree's control-plane writes.
fn static_object(label: &str, path: Option<&str>) -> Res<Variant> {
    let src = std::fs::read_to_string(examples_dir().join("ddos.py")).map_err(err("ddos.py"))?;
    let (image, entry, writes) =
        compile_static_with("ddos.py", &src, nfkit_lang::link::Inline::On)?;
    let tmp = std::env::temp_dir().join(format!("nfkit-ddos-{}.o", std::process::id()));
    let file = match path {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let bytes = nfkit_object::write_object(&image).map_err(err("write object"))?;
            std::fs::write(&tmp, bytes).map_err(err("temporary object"))?;
            tmp.clone()
        }
    };
    let loaded = timed(|| {
        let l = load_c(&file, None)?;
        for (m, k, v) in &writes {
            let map = l
                .map(m)
                .ok_or_else(|| format!("control plane: no map `{m}`"))?;
            map.update(k, v, 0).map_err(err(m))?;
        }
        Ok(l)
    });
    if path.is_none() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(variant(&format!("static, {label}"), loaded?, &entry))
}

/// The dynamic builds compared (`--bench ddos`).
#[derive(Clone, Copy)]
enum Dyn {
    /// This tree's: one tail call per NF call (the next segment runs the
    /// NF), calls inlined, the per-program passes after inlining.
    Chain,
    /// The same without the per-program passes.
    NoPasses,
    /// The NFs' shared entries, no inlining.
    Shared,
}

/// A compiler of the bench's library for one dynamic build.
type Compile = fn(&str, &str) -> Res<Program>;

fn dynamic_chain(kind: Dyn) -> Res<Variant> {
    let src = std::fs::read_to_string(examples_dir().join("ddos.py")).map_err(err("ddos.py"))?;
    let (compile, name): (Compile, &str) = match kind {
        Dyn::Chain => (compile_dynamic, "dynamic chain"),
        Dyn::NoPasses => (compile_dynamic_no_passes, "dynamic, no passes"),
        Dyn::Shared => (compile_dynamic_shared, "dynamic, shared entries"),
    };
    let (image, entry, writes) = compile("ddos.py", &src)?;
    Ok(variant(
        name,
        timed(|| load_compiled(&image, &writes))?,
        &entry,
    ))
}

fn tail_calls() -> Res<Variant> {
    let loaded = timed(|| {
        load_c(
            &ddos_tail_object(),
            Some((
                "td_jmp",
                &["td_blacklist_stage", "td_dst_stage", "td_pair_stage"],
            )),
        )
    })?;
    Ok(variant("tail calls", loaded, "td_parse"))
}

/// `load()` and its wall time in ms.
fn timed(load: impl FnOnce() -> Res<nfkit_kernel::Loaded>) -> Res<(nfkit_kernel::Loaded, f64)> {
    let t = std::time::Instant::now();
    let l = load()?;
    Ok((l, ms(t.elapsed())))
}

/// Prints what the kernel holds of each variant: programs, BPF
/// instructions after the verifier (xlated), bytes of machine code, the
/// verifier's processed instructions, and the load time.
fn print_code(variants: &[Variant]) {
    let table: Vec<Vec<String>> = variants
        .iter()
        .map(|v| {
            let progs = v.subject.loaded.progs();
            let infos: Vec<nfkit_kernel::ProgInfo> =
                progs.iter().filter_map(|p| p.info().ok()).collect();
            let sum = |f: fn(&nfkit_kernel::ProgInfo) -> u32| -> u32 { infos.iter().map(f).sum() };
            let entry = v.subject.prog().ok().and_then(|p| p.info().ok());
            vec![
                v.name.to_string(),
                progs.len().to_string(),
                entry.map_or("-".into(), |i| i.xlated_insns.to_string()),
                sum(|i| i.xlated_insns).to_string(),
                sum(|i| i.jited_bytes).to_string(),
                sum(|i| i.verified_insns).to_string(),
                format!("{:.1}", v.load_ms),
            ]
        })
        .collect();
    print_table(
        "DDoS example, code in the kernel (xlated = BPF instructions after the verifier; \
         verified = instructions the verifier processed; load = wall time of loading)",
        &[
            "variant",
            "programs",
            "entry xlated",
            "all xlated",
            "jited bytes",
            "verified",
            "load ms",
        ],
        &table,
    );
}

/// A measured path: (ns per packet, XDP code of the last run).
type Cell = Option<(f64, u32)>;

/// Rounds of the per-packet cost table (each: 100k runs of every
/// variant), unless `NFKIT_DDOS_ROUNDS` says otherwise.
const COST_ROUNDS: usize = 15;

fn cost_rounds() -> usize {
    std::env::var("NFKIT_DDOS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(COST_ROUNDS)
}

const LEGIT_DST: [u8; 4] = [198, 18, 2, 1];

/// The two paths: (name, frame).
fn paths() -> [(&'static str, Vec<u8>); 2] {
    [
        ("legit", udp4([198, 18, 1, 10], LEGIT_DST, 40000, 53)),
        ("flood", udp4([198, 18, 9, 9], [198, 18, 2, 2], 40001, 80)),
    ]
}

/// Sets `v` up for `path`: the legit destination's bucket is charged;
/// the flood source is blacklisted by its own packets (100 at once
/// empty both of its buckets).
fn prepare(v: &mut Variant, path: &str, frame: &[u8]) -> Res<()> {
    if path == "legit" {
        v.buckets.charge(LEGIT_DST)
    } else {
        v.subject.run_batches(frame, 1, 100).map(|_| ())
    }
}

/// Loads the four variants; the ones that fail are named in the second
/// list (printed at the end).
fn load_variants() -> (Vec<Variant>, Vec<String>) {
    let mut variants: Vec<Variant> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut loads: Vec<(String, Res<Variant>)> = vec![
        ("hand C".into(), hand_c()),
        (
            "static chain".into(),
            static_chain(nfkit_lang::link::Inline::On),
        ),
    ];
    if let Ok(list) = std::env::var("NFKIT_DDOS_BASELINE") {
        loads.push((
            "static, this tree (object)".into(),
            static_object("this tree (object)", None),
        ));
        for item in list.split(',').filter(|s| !s.is_empty()) {
            let v = match item.split_once('=') {
                Some((label, path)) => static_object(label, Some(path)),
                None => Err(format!("NFKIT_DDOS_BASELINE: `{item}` is not LABEL=PATH")),
            };
            loads.push((format!("baseline {item}"), v));
        }
    }
    for (name, v) in loads.into_iter().chain([
        (
            "static, calls".into(),
            static_chain(nfkit_lang::link::Inline::Off),
        ),
        ("dynamic chain".into(), dynamic_chain(Dyn::Chain)),
        ("dynamic, no passes".into(), dynamic_chain(Dyn::NoPasses)),
        ("dynamic, shared entries".into(), dynamic_chain(Dyn::Shared)),
        ("tail calls".into(), tail_calls()),
    ]) {
        match v {
            Ok(v) => variants.push(v),
            Err(e) => missing.push(format!("{name}: {e}")),
        }
    }
    (variants, missing)
}

/// Criterion: ns per packet (kernel time) per variant and path.
fn run_criterion(c: &mut Criterion, variants: &mut [Variant]) {
    let mut g = c.benchmark_group("ddos");
    for v in variants.iter_mut() {
        for (path, frame) in paths() {
            if let Err(e) = prepare(v, path, &frame) {
                println!("ddos: {} {path}: {e}", v.name);
                continue;
            }
            g.bench_with_input(BenchmarkId::new(v.name.as_str(), path), &path, |b, _| {
                b.iter_custom(|iters| {
                    let r = v
                        .subject
                        .run_batches(&frame, 1, iters.min(u32::MAX as u64) as u32);
                    Duration::from_nanos(r.map(|(ns, _)| ns).unwrap_or(0))
                })
            });
        }
    }
    g.finish();
    c.final_summary();
}

/// Per-packet cost of each variant on both paths over the interleaved
/// rounds of 100k runs, with the verdict of one more run: the medians,
/// and the interquartile means (finer, for comparing builds).
fn measure_cost(variants: &mut [Variant]) -> [Vec<(String, [Cell; 2])>; 2] {
    let mut cost: Vec<(String, [Cell; 2])> = variants
        .iter()
        .map(|v| (v.name.clone(), [None, None]))
        .collect();
    let mut iqm = cost.clone();
    let rounds = cost_rounds();
    for (i, (path, frame)) in paths().iter().enumerate() {
        let mut ok = vec![false; variants.len()];
        for (vi, v) in variants.iter_mut().enumerate() {
            match prepare(v, path, frame) {
                Ok(()) => ok[vi] = true,
                Err(e) => println!("ddos: {} {path}: {e}", v.name),
            }
        }
        // Interleaved rounds: every variant once per round, so that a
        // slow spell of the machine hits them all alike.
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        for _ in 0..rounds {
            for (vi, v) in variants.iter_mut().enumerate() {
                if !ok[vi] {
                    continue;
                }
                if let Ok(ns) = v.subject.ns_per_packet(frame, 1, 1, 100_000) {
                    samples[vi].push(ns);
                }
            }
        }
        for (vi, v) in variants.iter_mut().enumerate() {
            if samples[vi].is_empty() {
                continue;
            }
            let code = v.subject.run_batches(frame, 1, 1).map(|(_, c)| c).ok();
            cost[vi].1[i] = code.map(|c| (median(&mut samples[vi]), c));
            iqm[vi].1[i] = code.map(|c| (interquartile_mean(&mut samples[vi]), c));
        }
    }
    [cost, iqm]
}

/// Prints the per-packet cost table (`stat`: which statistic of the
/// rounds), ratios against hand C.
fn print_cost(cost: &[(String, [Cell; 2])], stat: &str) {
    let base = |i: usize| {
        cost.iter()
            .find(|(n, _)| n == "hand C")
            .and_then(|(_, r)| r[i].map(|x| x.0))
    };
    let table: Vec<Vec<String>> = cost
        .iter()
        .map(|(name, r)| {
            let mut row = vec![name.to_string()];
            for (i, cell) in r.iter().enumerate() {
                row.push(cell.map_or("-".into(), |(ns, code)| {
                    format!("{ns:.1} ({})", xdp_code(code))
                }));
                row.push(ratio(cell.map(|x| x.0), base(i)));
                // HIKe's measure: the throughput lost against hand C.
                row.push(match (cell.map(|x| x.0), base(i)) {
                    (Some(v), Some(b)) if v > 0.0 => format!("{:.1} %", 100.0 * (1.0 - b / v)),
                    _ => "-".into(),
                });
            }
            row
        })
        .collect();
    print_table(
        &format!(
            "DDoS example, ns per packet (BPF_PROG_TEST_RUN, {stat} of {} interleaved rounds of 100k runs; \
             verdict of the last run; ratio = variant / hand C; loss = 1 - hand C / variant)",
            cost_rounds()
        ),
        &["variant", "legit", "/hand C", "loss", "flood", "/hand C", "loss"],
        &table,
    );
}

/// A throughput measurement: (name, rates, the program's own ns per packet).
type RateRow = (String, Rate, Option<f64>);

/// Attaches `v` to the receiving veth of `tb`, blasts `flows` for 1.5 s
/// and gives the rates and the program's own run time per packet (from
/// the BPF run-time statistics, if they are on).
fn blast_through(
    tb: &nfkit_kernel::Testbed,
    v: &Variant,
    flows: &[nfkit_traffic::flows::Flow],
) -> Res<(Rate, Option<f64>)> {
    let prog = v.subject.prog()?;
    let _a = Attached::new(prog, &tb.ns_b, &tb.veth.b.dev, false)?;
    let before = prog_runtime(prog).ok();
    let rate = blast(tb, flows, 1.5)?;
    let after = prog_runtime(prog).ok();
    let ns = match (before, after) {
        (Some((t0, n0)), Some((t1, n1))) if n1 > n0 => Some((t1 - t0) as f64 / (n1 - n0) as f64),
        _ => None,
    };
    Ok((rate, ns))
}

/// Throughput through a veth pair: without a program, then each variant.
fn measure_throughput(variants: &[Variant]) -> Vec<RateRow> {
    let flows: Vec<_> = (0..4u8)
        .map(|i| flow_spec([198, 18, 9, 10 + i], [198, 18, 2, 2], 40000 + i as u16, 80))
        .collect();
    let mut rates: Vec<RateRow> = Vec::new();
    let tb = match nfkit_kernel::Testbed::pair() {
        Err(e) => {
            println!("ddos: no testbed, throughput left out: {e}");
            return rates;
        }
        Ok(tb) => tb,
    };
    match blast(&tb, &flows, 1.5) {
        Ok(r) => rates.push(("no XDP program".into(), r, None)),
        Err(e) => println!("ddos: throughput without a program: {e}"),
    }
    let stats = BpfStats::enable();
    if let Err(e) = &stats {
        println!("ddos: no BPF run-time statistics: {e}");
    }
    for v in variants.iter() {
        match blast_through(&tb, v, &flows) {
            Ok((r, ns)) => rates.push((v.name.clone(), r, ns)),
            Err(e) => println!("ddos: throughput of {}: {e}", v.name),
        }
    }
    drop(stats);
    rates
}

/// Prints the throughput table, ratios against hand C.
fn print_throughput(rates: &[RateRow]) {
    let base = rates.iter().find(|(n, _, _)| n == "hand C");
    let (base_pps, base_ns) = (base.map(|b| b.1.rx_pps), base.and_then(|b| b.2));
    let table: Vec<Vec<String>> = rates
        .iter()
        .map(|(n, r, ns)| {
            vec![
                n.clone(),
                format!("{:.3}", r.sent_pps / 1e6),
                format!("{:.3}", r.rx_pps / 1e6),
                ratio(Some(r.rx_pps), base_pps),
                ns.map_or("-".into(), |ns| format!("{ns:.1}")),
                ratio(*ns, base_ns),
            ]
        })
        .collect();
    print_table(
        "DDoS example, veth throughput (native XDP on the receiving veth, nfkit send \
         for 1.5 s, 4 flooding sources; Mpps; XDP ns/packet = the program's run time \
         under this traffic, kernel.bpf_stats_enabled; ratios = variant / hand C)",
        &[
            "variant",
            "sent Mpps",
            "received Mpps",
            "/hand C",
            "XDP ns/packet",
            "/hand C",
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
    if let Ok(path) = std::env::var("NFKIT_DDOS_SAVE") {
        match save_static(&path) {
            Ok(()) => println!("ddos: static chain written to {path}"),
            Err(e) => println!("ddos: NFKIT_DDOS_SAVE: {e}"),
        }
        return;
    }
    if !is_root() {
        println!("ddos: skipped (the kernel benchmarks need root)");
        return;
    }
    let quick = std::env::var("NFKIT_DDOS_QUICK").is_ok_and(|v| v == "1");
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let (mut variants, missing) = load_variants();
    if !quick {
        run_criterion(&mut c, &mut variants);
    }
    let [cost, iqm] = measure_cost(&mut variants);
    print_cost(&cost, "median");
    print_cost(
        &iqm,
        "interquartile mean (the middle half of the rounds: finer than the kernel's whole-ns \
         time per run, for comparing builds)",
    );
    print_code(&variants);
    if !quick {
        print_throughput(&measure_throughput(&variants));
    }
    for m in &missing {
        println!("{m}");
    }
}
