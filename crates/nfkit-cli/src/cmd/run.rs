//! `nfkit run FILE.o [--section NAME] [--type xdp|tc|socket] --pcap IN.pcap [--out OUT.pcap]
//! [--fib FILE] [--tunnel-key SPEC] [--trace] [--trace-packets LIST] [--engine jit|interp]
//! [--json]`: runs an eBPF program in the userspace VM on every packet of
//! a capture.
//!
//! `--engine` picks the VM's engine (default [`Engine::best`]: the JIT on
//! x86-64). The summary names the engine that ran the program (`engine:
//! jit`, or `engine: interp (JIT fallback: why)` when the JIT could not
//! compile it; `engine` and `engine_fallback` in JSON, and per packet
//! `engine`); traced packets always run on the interpreter, and the
//! summary says so.
//!
//! Prints how many packets got each return code (XDP_* names for XDP,
//! TC_ACT_* for tc, byte counts for socket filters, as
//! [`nfkit_abi::Hook::code_name`] names them), writes the packets the
//! hook keeps ([`nfkit_abi::Hook::keeps_packet`]: XDP_PASS/TX/REDIRECT;
//! every TC code but SHOT, STOLEN, QUEUED and TRAP; socket filters'
//! non-zero verdicts, cut to the kept length) with their modifications to
//! OUT, and with `--trace` every executed instruction: its pc and
//! disassembly, the memory it read or wrote, the helper it called, the
//! registers it changed (see [`nfkit_vm::TraceStep`]).
//!
//! `bpf_perf_event_output` records are printed per packet (`perf_events`
//! with `--json`), as is tunnel metadata a program set. `--fib FILE` gives
//! `bpf_fib_lookup` its devices, routes and neighbours (the form `ip -o
//! link`, `ip route` and `ip neigh` print, see [`nfkit_vm::FibTable`]);
//! without it every lookup answers "not forwarded". `--tunnel-key`
//! gives every packet received tunnel metadata (`bpf_skb_get_tunnel_key`).
//!
//! Runs are reproducible: `bpf_ktime_get_ns` reads the packet's capture
//! timestamp, `bpf_get_prandom_u32` a fixed-seed sequence. A FILE that is
//! not an ELF object is taken as a chain script ([`super::run_script`]).

use super::hook_of;
use anyhow::{anyhow, bail, Context as _};
use nfkit_abi::Hook;
use nfkit_object::Image;
use nfkit_pcap::Packet;
use nfkit_vm::{
    Context, Engine, EngineUse, FibTable, FixedClock, RunOptions, RunResult, SeqRng, SkBuff,
    TraceStep, TunnelKey, Vm, VmConfig, XdpMd,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// eBPF ELF object (anything else is run as a chain script).
    pub file: PathBuf,
    /// Program to run: its ELF section (`xdp`, `tc`, ...) or function
    /// name; needed when the object has several.
    #[arg(long, value_name = "NAME")]
    pub section: Option<String>,
    /// Run the program as this type, whatever its section's name says
    /// (legacy names such as `xdp_foo`, `prog`, `xdp_sock`).
    #[arg(long = "type", value_name = "TYPE")]
    pub prog_type: Option<super::RunType>,
    /// Packets to run on (classic pcap, Ethernet).
    #[arg(long, value_name = "IN.pcap")]
    pub pcap: PathBuf,
    /// Where to write the packets the program passes or transmits.
    #[arg(long, value_name = "OUT.pcap")]
    pub out: Option<PathBuf>,
    /// Print every executed instruction: pc, disassembly, memory touched,
    /// helper called, registers changed.
    #[arg(long)]
    pub trace: bool,
    /// Packets to trace, 1-based (`1,3-5`); default all. Implies --trace.
    #[arg(long, value_name = "LIST")]
    pub trace_packets: Option<String>,
    /// Devices, routes and neighbours for `bpf_fib_lookup`, one per line
    /// as `ip -o link`, `ip route` and `ip neigh` print them (e.g.
    /// `198.18.0.0/24 dev 3 via 198.18.0.1`, `neigh 198.18.0.1 dev 3
    /// lladdr 02:00:00:00:00:01`).
    #[arg(long, value_name = "FILE")]
    pub fib: Option<PathBuf>,
    /// Tunnel metadata every packet arrived with (TC):
    /// `id=5,remote=198.18.0.2,local=198.18.0.1[,tos=N,ttl=N,label=N]`.
    #[arg(long, value_name = "SPEC")]
    pub tunnel_key: Option<String>,
    /// The VM's engine: `jit` (the default where there is one, x86-64)
    /// or `interp`. Traced packets always run on the interpreter.
    #[arg(long, value_name = "jit|interp", value_parser = super::parse_engine)]
    pub engine: Option<Engine>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The run options `--fib` and `--tunnel-key` ask for.
pub fn net_options(fib: Option<&PathBuf>, tunnel_key: Option<&str>) -> anyhow::Result<RunOptions> {
    let fib = match fib {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let t = FibTable::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            Some(Arc::new(t))
        }
        None => None,
    };
    let tunnel_key = match tunnel_key {
        Some(s) => Some(TunnelKey::parse(s).map_err(|e| anyhow!("--tunnel-key {s}: {e}"))?),
        None => None,
    };
    Ok(RunOptions {
        fib,
        tunnel_key,
        ..RunOptions::default()
    })
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    if !bytes.starts_with(b"\x7fELF") {
        return super::run_script::run(a);
    }
    let origin = a.file.display().to_string();
    let mut image = super::read_image(&bytes, &origin, a.prog_type)?;
    let entry = pick_entry(&image, a.section.as_deref())?;
    if let Some(t) = a.prog_type {
        image.entries[entry].prog_type = t.prog_type();
    }
    let (name, prog_type) = (
        image.entries[entry].name.clone(),
        image.entries[entry].prog_type,
    );
    let hook = hook_of(prog_type).ok_or_else(|| {
        anyhow!(
            "{name} is a {} program; nfkit run runs xdp, tc and socket filter programs",
            prog_type.name()
        )
    })?;
    let packets = nfkit_pcap::read_file(&a.pcap).map_err(super::pcap_error(&a.pcap))?;
    let selection = match &a.trace_packets {
        Some(s) => Some(parse_ranges(s)?),
        None => None,
    };
    let tracing = a.trace || selection.is_some();
    let net = net_options(a.fib.as_ref(), a.tunnel_key.as_deref())?;

    let clock = Arc::new(FixedClock::new(0));
    let config = VmConfig {
        ncpus: 1,
        clock: clock.clone(),
        rng: Arc::new(SeqRng::new(1)),
        ..VmConfig::kernel().with_engine(a.engine.unwrap_or_else(Engine::best))
    };
    let vm = Vm::new(&image, config).with_context(|| format!("loading {name}"))?;
    if let Some(why) = vm.entry_refused(entry) {
        bail!("loading {name}: {why}");
    }
    let mut runner = vm.runner();

    let mut t = Tally::new(vm.engine(entry).cloned().unwrap_or(EngineUse::Interp));
    for (i, p) in packets.iter().enumerate() {
        let n = i as u64 + 1;
        let trace = tracing
            && selection
                .as_ref()
                .is_none_or(|s| s.iter().any(|&(lo, hi)| lo <= n && n <= hi));
        clock.set(p.ts_ns);
        let ctx = match hook {
            Hook::Xdp | Hook::Switch => Context::Xdp(XdpMd::new(&p.data)),
            Hook::Tc | Hook::Socket => Context::Skb(SkBuff::new(&p.data)),
        };
        let res = runner.run(
            entry,
            ctx,
            &RunOptions {
                trace,
                ..net.clone()
            },
        );
        let code = hook.code(res.code());
        *t.counts.entry(code).or_default() += 1;
        t.traced += usize::from(trace);
        if res.result.is_err() {
            t.faults += 1;
        }
        let out = output(hook, code, &res);
        if let Some(data) = &out {
            t.written.push(Packet {
                ts_ns: p.ts_ns,
                data: data.clone(),
            });
        }
        if a.json {
            t.results.push(packet_json(
                n,
                p,
                code,
                hook,
                &res,
                out.as_ref(),
                &vm,
                trace,
            ));
        } else {
            if let Err(e) = &res.result {
                println!("packet {n}: fault: {e}");
            }
            for ev in &res.perf_events {
                println!("packet {n}: perf event {ev}");
            }
            for c in &res.clones {
                println!("packet {n}: {c}");
            }
            if let Some(k) = res.tunnel_key.as_ref().filter(|k| k.tx) {
                println!("packet {n}: tunnel key {k}");
            }
            if trace {
                print_trace(n, p, code, hook, &res);
            }
        }
    }
    if let Some(path) = &a.out {
        nfkit_pcap::write_file(path, &t.written).map_err(super::pcap_error(path))?;
    }
    if a.json {
        t.maps = super::vm_maps_json(&image, &vm);
    }
    print_summary(&a, &image.entries[entry], hook, packets.len(), &t)?;
    Ok(ExitCode::SUCCESS)
}

/// What the runs over a capture added up to.
struct Tally {
    /// Packets per return code.
    counts: BTreeMap<i64, u64>,
    /// The packets the hook kept, as the program left them.
    written: Vec<Packet>,
    /// Per-packet results (with `--json`).
    results: Vec<serde_json::Value>,
    faults: u64,
    /// Every map after the run (with `--json`).
    maps: Vec<serde_json::Value>,
    /// What runs the entry (untraced packets).
    engine: EngineUse,
    /// Packets traced (run on the interpreter).
    traced: usize,
}

impl Tally {
    fn new(engine: EngineUse) -> Tally {
        Tally {
            counts: BTreeMap::new(),
            written: Vec::new(),
            results: Vec::new(),
            faults: 0,
            maps: Vec::new(),
            engine,
            traced: 0,
        }
    }
}

/// The counts per return code (and, with `--json`, every packet's result).
fn print_summary(
    a: &Args,
    e: &nfkit_object::Entry,
    hook: Hook,
    packets: usize,
    t: &Tally,
) -> anyhow::Result<()> {
    let (name, prog_type) = (&e.name, e.prog_type);
    if a.json {
        let counts: serde_json::Map<String, serde_json::Value> = t
            .counts
            .iter()
            .map(|(&c, &k)| (hook.code_name(c), json!(k)))
            .collect();
        let mut v = json!({
            "program": name,
            "section": e.section,
            "type": prog_type.name(),
            "packets": packets,
            "counts": counts,
            "faults": t.faults,
            "written": a.out.as_ref().map(|_| t.written.len()),
            "results": t.results,
            "maps": t.maps,
        });
        nfkit_control::runner::engine_json(&mut v, &t.engine, t.traced);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{name} ({}) on {packets} packets:", prog_type.name());
        for (&c, &k) in &t.counts {
            println!("  {:<16} {k}", hook.code_name(c));
        }
        if let Some(path) = &a.out {
            println!("wrote {} packets to {}", t.written.len(), path.display());
        }
        println!(
            "{}",
            nfkit_control::runner::engine_line(&t.engine, t.traced, packets)
        );
    }
    Ok(())
}

/// The entry to run: the one whose section or name is `want`, or the only one.
pub fn pick_entry(image: &Image, want: Option<&str>) -> anyhow::Result<usize> {
    let list = || {
        image
            .entries
            .iter()
            .map(|e| format!("{} (section {})", e.name, e.section))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match want {
        Some(w) => {
            if let Some(i) = image.entries.iter().position(|e| e.name == w) {
                return Ok(i);
            }
            let in_section: Vec<usize> = (0..image.entries.len())
                .filter(|&i| image.entries[i].section == w)
                .collect();
            match in_section[..] {
                [i] => Ok(i),
                [] => bail!(
                    "no program with section or name `{w}`; the object has: {}",
                    list()
                ),
                _ => bail!("section `{w}` holds several programs, name one: {}", list()),
            }
        }
        None => match image.entries.len() {
            0 => bail!("the object has no programs"),
            1 => Ok(0),
            _ => bail!(
                "the object has several programs, pick one with --section: {}",
                list()
            ),
        },
    }
}

/// `1,3-5` as inclusive ranges.
fn parse_ranges(s: &str) -> anyhow::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<u64>()
                .map_err(|_| anyhow!("--trace-packets: `{t}` is not a packet number (1-based)"))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo == 0 || hi < lo {
            bail!("--trace-packets: `{part}` is not a range of packet numbers (1-based, low-high)");
        }
        out.push((lo, hi));
    }
    if out.is_empty() {
        bail!("--trace-packets: no packets given");
    }
    Ok(out)
}

/// The packet the hook lets through or sends, if any: none after a fault
/// or when the code drops it ([`Hook::keeps_packet`]); a socket filter
/// keeps the number of bytes it returned, counted from the network header.
fn output(hook: Hook, code: i64, res: &RunResult) -> Option<Vec<u8>> {
    if res.result.is_err() || !hook.keeps_packet(code) {
        return None;
    }
    match hook {
        Hook::Socket => {
            let keep = (nfkit_vm::ctx::ETH_HLEN as u64).saturating_add(code as u64);
            let keep = usize::try_from(keep)
                .unwrap_or(usize::MAX)
                .min(res.packet.len());
            res.packet.get(..keep).map(<[u8]>::to_vec)
        }
        Hook::Xdp | Hook::Tc | Hook::Switch => Some(res.packet.clone()),
    }
}

/// One packet's trace: each step (see [`RunResult::trace_lines`]), then
/// what the run gave.
fn print_trace(n: u64, p: &Packet, code: i64, hook: Hook, res: &RunResult) {
    println!("packet {n} ({} bytes):", p.data.len());
    for line in res.trace_lines() {
        println!("  {line}");
    }
    for text in &res.printk {
        println!("  trace_printk: {text}");
    }
    if let Some(r) = &res.redirect {
        println!("  redirect: {r}");
    }
    println!(
        "  -> {} ({code}), {} instructions",
        hook.code_name(code),
        res.insns
    );
}

/// One trace step as JSON.
fn step_json(s: &TraceStep, vm: &Vm) -> serde_json::Value {
    let mut v = json!({
        "slot": s.slot,
        "at": vm.location(s.op),
        "insn": s.insn.as_ref().map_or_else(
            || "?".to_string(),
            |i| nfkit_isa::disasm::format_insn(i, nfkit_isa::Syntax::Llvm),
        ),
        "changes": s
            .changes
            .iter()
            .map(|c| json!({"reg": c.reg, "old": c.old, "new": c.new}))
            .collect::<Vec<_>>(),
        "text": s.to_string(),
    });
    if let Some(f) = &s.enters {
        v["enters"] = json!(f);
    }
    if let Some(m) = &s.mem {
        v["mem"] = json!({
            "kind": m.kind.name(),
            "region": m.region.to_string(),
            "offset": m.offset,
            "size": m.size,
            "value": m.value,
            "old": m.old,
        });
    }
    if let Some(h) = &s.helper {
        v["helper"] = json!({
            "id": h.id,
            "name": h.name.map(|n| format!("bpf_{n}")),
            "ret": h.ret,
        });
    }
    if s.faulted {
        v["faulted"] = json!(true);
    }
    v
}

#[allow(clippy::too_many_arguments)]
fn packet_json(
    n: u64,
    p: &Packet,
    code: i64,
    hook: Hook,
    res: &RunResult,
    out: Option<&Vec<u8>>,
    vm: &Vm,
    trace: bool,
) -> serde_json::Value {
    let mut v = json!({
        "packet": n,
        "len": p.data.len(),
        "code": code,
        "verdict": hook.code_name(code),
        "kept": out.is_some(),
        "insns": res.insns,
        "engine": res.engine.name(),
        "error": res.result.as_ref().err().map(|e| e.to_string()),
        "out_len": out.map(Vec::len),
    });
    if let Some(r) = &res.redirect {
        v["redirect"] = json!(r.to_string());
    }
    if !res.printk.is_empty() {
        v["printk"] = json!(res.printk);
    }
    if !res.perf_events.is_empty() {
        v["perf_events"] = res.perf_events.iter().map(perf_json).collect();
    }
    if !res.clones.is_empty() {
        v["clones"] = res
            .clones
            .iter()
            .map(|c| json!({"ifindex": c.ifindex, "ingress": c.ingress, "packet": hex(&c.packet)}))
            .collect();
    }
    if let Some(k) = &res.tunnel_key {
        v["tunnel_key"] = tunnel_json(k);
    }
    if trace {
        v["trace"] = res.trace.iter().map(|s| step_json(s, vm)).collect();
    }
    v
}

/// One `bpf_perf_event_output` record as JSON: map name, CPU, the data
/// and the appended packet bytes in hex.
pub fn perf_json(e: &nfkit_vm::PerfEvent) -> serde_json::Value {
    json!({
        "map": e.map_name,
        "cpu": e.cpu,
        "data": hex(&e.data),
        "packet": hex(&e.packet),
    })
}

/// Tunnel metadata after a run as JSON (`remote`/`local` as
/// `bpf_skb_get_tunnel_key` would report them after a set: see
/// [`TunnelKey`]).
pub fn tunnel_json(k: &TunnelKey) -> serde_json::Value {
    let (remote, local) = if k.tx { (k.dst, k.src) } else { (k.src, k.dst) };
    json!({
        "set_by_program": k.tx,
        "id": k.id,
        "remote": remote.to_string(),
        "local": local.to_string(),
        "tos": k.tos,
        "ttl": k.ttl,
        "label": k.label,
        "flags": k.flags,
        "options": hex(&k.options),
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
