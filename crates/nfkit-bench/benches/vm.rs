//! Composition cost in nfkit's userspace VM (docs/cost.md, issue 15
//! item 5), the engine the software switch runs: the DDoS example as the
//! hand-written C (`examples/c/ddos.c` loaded into the VM), static chain
//! (inlined and with calls), the same two built for the switch hook, and
//! the dynamic chain; and N = 0, 1, 2, 4, 8, 16 calls to a no-op NF
//! (`c/bnop.c`) static inlined, static with calls and dynamic.
//!
//! Per variant: instructions executed per packet (the VM's count; a
//! helper call counts as one) and ns per packet (wall time of 20k runs
//! through one runner, real clock, median of interleaved rounds), with
//! ratios to the hand C and HIKe's loss = 1 - hand C / variant. Paths as
//! in `ddos.rs`: legit (destination bucket charged) and flood (the
//! source blacklisted by 100 packets first). Needs no root.

use nfkit_bench::*;
use nfkit_lang::link::Inline;
use nfkit_vm::{PacketCtx, RunOptions, Vm, VmConfig};
use std::time::Instant;

/// Runs per round and interleaved rounds.
const RUNS: usize = 20_000;
const ROUNDS: usize = 9;
const LEGIT_DST: [u8; 4] = [198, 18, 2, 1];
/// Tokens written into the legit destination's bucket (see ddos.rs).
const CHARGE: u64 = 1 << 62;

struct Variant {
    name: String,
    vm: Vm,
    entry: String,
}

fn load(name: &str, (image, entry, writes): Program) -> Res<Variant> {
    let vm = Vm::new(&image, VmConfig::kernel()).map_err(err(name))?;
    for (m, k, v) in &writes {
        vm.map(m)
            .ok_or_else(|| format!("{name}: control plane: no map `{m}`"))?
            .update(k, v, 0)
            .map_err(err(m))?;
    }
    // Real clock: the deployment's default (the control plane may pin it
    // for tests; here nothing is pinned).
    if let Some(cfg) = vm.map("nfkit_config") {
        let key = 0u32.to_le_bytes();
        let old = cfg.lookup(&key).map_err(err("nfkit_config"))?;
        let mut c = old
            .as_deref()
            .and_then(nfkit_abi::NfConfig::from_bytes)
            .unwrap_or_default();
        c.clock_pinned = 0;
        cfg.update(&key, &c.to_bytes(), 0)
            .map_err(err("nfkit_config"))?;
    }
    Ok(Variant {
        name: name.to_string(),
        vm,
        entry,
    })
}

/// The script compiled for `hook` (None: its own attach), static mode.
fn compile_hook(
    file: &str,
    src: &str,
    hook: Option<nfkit_abi::Hook>,
    inline: Inline,
) -> Res<Program> {
    let opts = nfkit_lang::Options {
        search: nfkit_nf::SearchPath::new(vec![nf_dir()]),
        hook,
    };
    let c = nfkit_lang::compile_with(file, src, &opts, inline).map_err(|e| format!("{e}"))?;
    let entry = c
        .entry()
        .ok_or_else(|| format!("{file}: no classifier"))?
        .to_string();
    let writes = c.control_plane();
    Ok((c.image, entry, writes))
}

fn hand_c() -> Res<Variant> {
    let path = hand_c_object().ok_or("examples/c/ddos.c is not there (or did not compile)")?;
    let bytes = std::fs::read(&path).map_err(err("ddos.o"))?;
    let image = nfkit_object::Image::from_elf(&bytes, "ddos.o").map_err(err("ddos.o"))?;
    let entry = image
        .entries
        .iter()
        .find(|e| e.prog_type == nfkit_object::ProgType::Xdp)
        .map(|e| e.name.clone())
        .ok_or("examples/c/ddos.c has no XDP program")?;
    load("hand C", (image, entry, Vec::new()))
}

/// Charges the legit destination's bucket (nfkit's `nf_meter_tb_dst`
/// or the hand C's `dst_buckets`).
fn charge(v: &Variant) -> Res<()> {
    let mut addr = vec![0u8; 10];
    addr.extend([0xff, 0xff]);
    addr.extend(LEGIT_DST);
    let mut value = vec![0u8; 8];
    value.extend(CHARGE.to_le_bytes());
    value.extend(0u64.to_le_bytes());
    let (map, key) = if let Some(m) = v.vm.map("nf_meter_tb_dst") {
        let mut k = addr;
        k.extend(100u32.to_le_bytes());
        k.extend(20u32.to_le_bytes());
        (m, k)
    } else if let Some(m) = v.vm.map("dst_buckets") {
        (m, addr)
    } else {
        return Err(format!("{}: no known bucket map", v.name));
    };
    map.update(&key, &value, 0).map_err(err("bucket"))
}

/// Runs `frame` `n` times: (wall ns per run, instructions of the last
/// run, its return code).
fn runs(v: &Variant, frame: &[u8], n: usize) -> Res<(f64, u64, u64)> {
    let mut runner = v.vm.runner();
    let opts = RunOptions::default();
    let mut pkt = frame.to_vec();
    let mut last = (0, 0);
    let t = Instant::now();
    for _ in 0..n {
        pkt.clear();
        pkt.extend_from_slice(frame);
        let o = runner.run_packet(v.entry.as_str(), &mut pkt, PacketCtx::Xdp, &opts);
        last = (o.insns, o.result.map_err(err(&v.name))?);
    }
    Ok((t.elapsed().as_nanos() as f64 / n as f64, last.0, last.1))
}

/// Median ns per run and instructions per run of each variant on
/// `frame`, interleaved rounds; None for variants that failed.
fn measure(variants: &[Variant], frame: &[u8]) -> Vec<Option<(f64, u64, u64)>> {
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut insns: Vec<Option<(u64, u64)>> = vec![None; variants.len()];
    for _ in 0..ROUNDS {
        for (i, v) in variants.iter().enumerate() {
            match runs(v, frame, RUNS) {
                Ok((ns, n, code)) => {
                    samples[i].push(ns);
                    insns[i] = Some((n, code));
                }
                Err(e) => println!("vm: {}: {e}", v.name),
            }
        }
    }
    samples
        .iter_mut()
        .zip(insns)
        .map(|(s, i)| i.filter(|_| !s.is_empty()).map(|(n, c)| (median(s), n, c)))
        .collect()
}

fn loss(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (Some(v), Some(b)) if v > 0.0 => format!("{:.1} %", 100.0 * (1.0 - b / v)),
        _ => "-".into(),
    }
}

fn ddos() {
    let src = match std::fs::read_to_string(examples_dir().join("ddos.py")) {
        Ok(s) => s,
        Err(e) => return println!("vm: ddos.py: {e}"),
    };
    let sw = Some(nfkit_abi::Hook::Switch);
    let mut variants = Vec::new();
    for (name, v) in [
        ("hand C", hand_c()),
        (
            "static chain",
            compile_hook("ddos.py", &src, None, Inline::On).and_then(|p| load("static chain", p)),
        ),
        (
            "static, calls",
            compile_hook("ddos.py", &src, None, Inline::Off).and_then(|p| load("static, calls", p)),
        ),
        (
            "switch build",
            compile_hook("ddos.py", &src, sw, Inline::On).and_then(|p| load("switch build", p)),
        ),
        (
            "switch, calls",
            compile_hook("ddos.py", &src, sw, Inline::Off).and_then(|p| load("switch, calls", p)),
        ),
        (
            "dynamic chain",
            compile_dynamic("ddos.py", &src).and_then(|p| load("dynamic chain", p)),
        ),
    ] {
        match v {
            Ok(v) => variants.push(v),
            Err(e) => println!("vm: {name} left out: {e}"),
        }
    }
    let paths = [
        ("legit", udp4([198, 18, 1, 10], LEGIT_DST, 40000, 53)),
        ("flood", udp4([198, 18, 9, 9], [198, 18, 2, 2], 40001, 80)),
    ];
    let mut cells: Vec<Vec<Option<(f64, u64, u64)>>> = Vec::new();
    for (path, frame) in &paths {
        for v in &variants {
            let r = if *path == "legit" {
                charge(v)
            } else {
                runs(v, frame, 100).map(|_| ())
            };
            if let Err(e) = r {
                println!("vm: {} {path}: {e}", v.name);
            }
        }
        cells.push(measure(&variants, frame));
    }
    let base = |p: usize| cells[p].first().copied().flatten();
    let table: Vec<Vec<String>> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut row = vec![v.name.clone()];
            for (p, col) in cells.iter().enumerate() {
                let c = col[i];
                let b = base(p);
                // Switch builds return the verdict itself, the others an XDP code.
                let verdict = |code: u64| {
                    if v.name.starts_with("switch") {
                        nfkit_abi::verdict::name(code)
                    } else {
                        xdp_code(code as u32).to_string()
                    }
                };
                row.push(c.map_or("-".into(), |(ns, _, code)| {
                    format!("{ns:.1} ({})", verdict(code))
                }));
                row.push(loss(c.map(|x| x.0), b.map(|x| x.0)));
                row.push(c.map_or("-".into(), |x| x.1.to_string()));
                row.push(ratio(c.map(|x| x.1 as f64), b.map(|x| x.1 as f64)));
            }
            row
        })
        .collect();
    print_table(
        "DDoS example in the VM (best engine, real clock): ns per packet (median of 9 \
         interleaved rounds of 20k runs; verdict), loss = 1 - hand C / variant, \
         instructions executed per packet and their ratio to the hand C",
        &[
            "variant", "legit ns", "loss", "insns", "/hand C", "flood ns", "loss", "insns",
            "/hand C",
        ],
        &table,
    );
}

/// A chain making `n` calls to `nop` (as in calls.rs).
fn nop_script(n: usize) -> String {
    let mut s = String::from(
        "from nf.bnop import nop\nfrom nf.classify import every_packet\n\ndef calls() -> u64:\n    x: u64 = 1\n",
    );
    for _ in 0..n {
        s.push_str("    x = nop(x)\n");
    }
    s.push_str("    return PASS\n\nevery_packet(calls)\nattach(\"eth0\", \"xdp\")\n");
    s
}

/// Compiles a script: (file, source) to a loadable program.
type Compile = fn(&str, &str) -> Res<Program>;

fn calls() {
    const NS: [usize; 6] = [0, 1, 2, 4, 8, 16];
    let frame = udp4([198, 18, 1, 10], LEGIT_DST, 40000, 53);
    let modes: [(&str, Compile); 3] = [
        ("static", |f, s| compile_hook(f, s, None, Inline::On)),
        ("static, calls", |f, s| {
            compile_hook(f, s, None, Inline::Off)
        }),
        ("dynamic", compile_dynamic),
    ];
    let mut variants = Vec::new();
    let mut index = Vec::new();
    for &n in &NS {
        for (m, compile) in &modes {
            let name = format!("{m} N={n}");
            match compile(&format!("calls{n}.py"), &nop_script(n)).and_then(|p| load(&name, p)) {
                Ok(v) => {
                    index.push(Some(variants.len()));
                    variants.push(v);
                }
                Err(e) => {
                    println!("vm: {name} left out: {e}");
                    index.push(None);
                }
            }
        }
    }
    let cells = measure(&variants, &frame);
    let at = |n: usize, m: usize| -> Option<(f64, u64, u64)> {
        let k = NS.iter().position(|&x| x == n)? * modes.len() + m;
        index[k].and_then(|i| cells[i])
    };
    let mut table: Vec<Vec<String>> = NS
        .iter()
        .map(|&n| {
            let mut row = vec![n.to_string()];
            for m in 0..modes.len() {
                let c = at(n, m);
                row.push(c.map_or("-".into(), |x| format!("{:.1}", x.0)));
                row.push(c.map_or("-".into(), |x| x.1.to_string()));
            }
            row
        })
        .collect();
    let last = *NS.last().unwrap_or(&16);
    let mut per = vec!["per call".to_string()];
    for m in 0..modes.len() {
        match (at(0, m), at(last, m)) {
            (Some(a), Some(b)) => {
                per.push(format!("{:.2}", (b.0 - a.0) / last as f64));
                per.push(format!("{:.1}", (b.1 as f64 - a.1 as f64) / last as f64));
            }
            _ => per.extend(["-".into(), "-".into()]),
        }
    }
    table.push(per);
    print_table(
        "N calls to a no-op NF in the VM (best engine): ns per packet (median of 9 \
         interleaved rounds of 20k runs) and instructions executed per packet",
        &[
            "N",
            "static ns",
            "insns",
            "static, calls ns",
            "insns",
            "dynamic ns",
            "insns",
        ],
        &table,
    );
}

fn main() {
    // `cargo bench -- FILTER` / `--bench` arguments are accepted and ignored.
    ddos();
    calls();
}
