//! `nfkit rtl run FILE --pcap IN [-o OUT] [--section NAME] [--type xdp]
//! [--engines N] [--vcd FILE] [--trace] [--json]`: runs an eBPF program
//! on the RTL processor (`rtl/`, simulated by Verilator through
//! [`nfkit_rtl`]) on every packet of a capture. The report is `nfkit
//! run`'s (packets per return code, packets written) plus what the
//! hardware adds: cycles per packet, CPI, stall cycles by cause,
//! mispredicted branches, and per engine the packets and busy cycles. With
//! `--engines N` (up to 4) the packets go through the switch top
//! (`rtl/ebpf_switch.sv`): in on port 0, dealt round-robin to its first N
//! engines by the port's demux, out through the arbiters and the
//! crossbar; the report adds the switch's cycles and copies per output.
//! The switch's engines share one copy of the maps (per-CPU arrays: one
//! per engine), so with several engines a packet may see the map updates
//! of packets that arrived after it but finished first, as on a
//! multi-core host; `--check` compares with the VM's one-at-a-time run.
//! `--trace` prints the retired pcs of every packet; `--vcd` dumps every
//! signal of engine 0. `--stream` streams each packet in (8 bytes a
//! cycle) while the program runs. `--check` also runs every packet in
//! nfkit's VM and compares return code, packet bytes and instruction
//! count (exit code 1 when any differs).
//!
//! A FILE that is not an ELF object is compiled as a chain script and its
//! entry loaded. The loader refuses, by name, any instruction or helper
//! the core lacks (exit code 1). Runs are reproducible:
//! `bpf_ktime_get_ns` reads the packet's capture timestamp, as in `nfkit
//! run`.
//!
//! `nfkit rtl synth [--json]`: Yosys `synth_xilinx` of one engine for a
//! 7-series part: LUTs, flip-flops, block RAMs, DSPs and a clock estimate
//! from the critical path (see
//! [`nfkit_rtl::synth`]).

use super::hook_of;
use anyhow::{anyhow, bail, Context as _};
use nfkit_abi::Hook;
use nfkit_object::Image;
use nfkit_pcap::Packet;
use nfkit_rtl::{Core, Ctx, Program, RunInput, RunResult, Stalls};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run a program (or chain script) on the RTL core on a pcap.
    Run(RunArgs),
    /// Synthesise one engine with Yosys for Xilinx 7-series: resources and
    /// a clock estimate.
    Synth(SynthArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// eBPF ELF object (anything else is compiled as a chain script).
    pub file: PathBuf,
    /// Program to run: its ELF section or function name; needed when the
    /// object has several.
    #[arg(long, value_name = "NAME")]
    pub section: Option<String>,
    /// Run the program as this type, whatever its section's name says
    /// (the core runs XDP programs).
    #[arg(long = "type", value_name = "TYPE")]
    pub prog_type: Option<super::RunType>,
    /// Packets to run on (classic pcap, Ethernet).
    #[arg(long, value_name = "IN.pcap")]
    pub pcap: PathBuf,
    /// Where to write the packets the program passes or transmits.
    #[arg(short = 'o', long, value_name = "OUT.pcap")]
    pub out: Option<PathBuf>,
    /// Engines the packets are spread over, round-robin (2-4: through the
    /// switch top's port 0).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub engines: usize,
    /// Dump every signal of engine 0 to this VCD file.
    #[arg(long, value_name = "FILE")]
    pub vcd: Option<PathBuf>,
    /// Print the retired pcs of every packet.
    #[arg(long)]
    pub trace: bool,
    /// Run every packet in the VM too and compare (code, packet,
    /// instruction count).
    #[arg(long)]
    pub check: bool,
    /// Stream each packet into the engine (8 bytes a cycle) while the
    /// program runs, instead of writing it whole before it starts.
    #[arg(long)]
    pub stream: bool,
    /// Give a map declaring more entries than N only N lines of the
    /// coprocessor (the catalogue's tables declare 16384-65536); a packet
    /// needing more stops with a capacity fault rather than differing
    /// from the VM.
    #[arg(long, value_name = "N")]
    pub map_lines: Option<u32>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct SynthArgs {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Run(a) => run_capture(a),
        Command::Synth(a) => synth(a),
    }
}

/// The program FILE names: an ELF object's entry, or a chain script's.
fn load(a: &RunArgs) -> anyhow::Result<Option<(Image, usize)>> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let origin = a.file.display().to_string();
    if !bytes.starts_with(b"\x7fELF") {
        if a.prog_type.is_some() {
            bail!("{origin}: --type applies to ELF objects, not chain scripts");
        }
        let source = String::from_utf8(bytes)
            .map_err(|_| anyhow!("{origin}: neither an ELF object nor a chain script"))?;
        let Some(compiled) = super::compile::compile_or_report(&origin, &source, &[])? else {
            return Ok(None);
        };
        let entry_name = compiled
            .entry()
            .ok_or_else(|| anyhow!("{origin}: the script configures no classifier to run"))?
            .to_string();
        let image = compiled.image;
        let entry = image
            .entries
            .iter()
            .position(|e| e.name == entry_name)
            .ok_or_else(|| anyhow!("{origin}: no entry `{entry_name}` in the compiled image"))?;
        return Ok(Some((image, entry)));
    }
    let mut image = super::read_image(&bytes, &origin, a.prog_type)?;
    let entry = super::run::pick_entry(&image, a.section.as_deref())?;
    if let Some(t) = a.prog_type {
        image.entries[entry].prog_type = t.prog_type();
    }
    Ok(Some((image, entry)))
}

/// Sums over the runs of one engine or all.
#[derive(Default)]
struct Totals {
    packets: u64,
    cycles: u64,
    retired: u64,
    stalls: Stalls,
    min: Option<u64>,
    max: u64,
}

impl Totals {
    fn add(&mut self, r: &RunResult) {
        self.packets += 1;
        self.cycles += r.cycles;
        self.retired += r.retired;
        self.stalls.load_use += r.stalls.load_use;
        self.stalls.div += r.stalls.div;
        self.stalls.call += r.stalls.call;
        self.stalls.rx += r.stalls.rx;
        self.stalls.values += r.stalls.values;
        self.stalls.flushes += r.stalls.flushes;
        self.min = Some(self.min.map_or(r.cycles, |m| m.min(r.cycles)));
        self.max = self.max.max(r.cycles);
    }
    fn per_packet(&self) -> f64 {
        self.cycles as f64 / self.packets.max(1) as f64
    }
    fn cpi(&self) -> f64 {
        self.cycles as f64 / self.retired.max(1) as f64
    }
}

fn run_capture(a: RunArgs) -> anyhow::Result<ExitCode> {
    if a.engines == 0 {
        bail!("--engines must be at least 1");
    }
    let Some((image, entry)) = load(&a)? else {
        return Ok(ExitCode::from(1));
    };
    let e = &image.entries[entry];
    let (name, prog_type) = (e.name.clone(), e.prog_type);
    let hook = hook_of(prog_type).filter(|h| *h == Hook::Xdp).ok_or_else(|| {
        anyhow!(
            "{name} is a {} program; the RTL core runs XDP programs (tc and socket contexts are not in this slice)",
            prog_type.name()
        )
    })?;
    let program = match Program::from_image_sized(&image, entry, a.map_lines) {
        Ok(p) => p,
        Err(err) => {
            eprintln!("error: loading {name} on the RTL core: {err}");
            return Ok(ExitCode::from(1));
        }
    };
    let packets = nfkit_pcap::read_file(&a.pcap).map_err(super::pcap_error(&a.pcap))?;
    if a.engines > nfkit_rtl::switch::ENGINES {
        bail!(
            "--engines {}: the switch top has {} engines per port (the capture comes in on one port)",
            a.engines,
            nfkit_rtl::switch::ENGINES
        );
    }
    // Several engines: the packets go through the switch top (port 0's
    // round-robin demux over its first N engines, maps shared).
    let mut switched = None;
    if a.engines > 1 {
        if a.trace || a.vcd.is_some() {
            bail!("--trace and --vcd record one engine: use them with --engines 1");
        }
        switched = Some(
            run_switch(&program, &packets, a.engines)
                .with_context(|| format!("running {name} on the switch top"))?,
        );
    }
    let mut engines = Vec::with_capacity(a.engines);
    if switched.is_none() {
        for _ in 0..a.engines {
            engines.push(Core::new(program.clone()).with_context(|| format!("loading {name}"))?);
        }
        if let Some(path) = &a.vcd {
            engines[0].vcd(path)?;
        }
    }

    let mut checker = if a.check {
        Some(Checker::new(&image, entry)?)
    } else {
        None
    };
    let mut counts: BTreeMap<i64, u64> = BTreeMap::new();
    let mut written = Vec::new();
    let mut results = Vec::new();
    let mut faults = 0u64;
    let mut all = Totals::default();
    let mut per_engine: Vec<Totals> = (0..a.engines).map(|_| Totals::default()).collect();
    let mut from_switch = switched
        .as_mut()
        .map(|s| std::mem::take(&mut s.runs).into_iter());
    for (i, p) in packets.iter().enumerate() {
        let n = i + 1;
        let (k, res) = match from_switch.as_mut().and_then(|r| r.next()) {
            Some(done) => done,
            None => {
                let k = i % a.engines;
                let input = RunInput {
                    packet: &p.data,
                    ctx: Ctx::Xdp {
                        ingress_ifindex: 1,
                        rx_queue_index: 0,
                    },
                    timestamp: p.ts_ns,
                    trace: a.trace,
                    stream: a.stream,
                    max_cycles: nfkit_rtl::core::DEFAULT_MAX_CYCLES,
                    via_port: false,
                };
                let res = engines[k]
                    .run(&input)
                    .with_context(|| format!("packet {n}"))?;
                (k, res)
            }
        };
        // A fault ends the run as XDP_ABORTED, as in the VM.
        let code = match &res.result {
            Ok(r0) => hook.code(*r0),
            Err(f) => {
                faults += 1;
                if !a.json {
                    println!("packet {n}: fault: {f}");
                }
                0
            }
        };
        *counts.entry(code).or_default() += 1;
        if let Some(c) = checker.as_mut() {
            c.compare(n, p, hook, code, &res);
        }
        all.add(&res);
        per_engine[k].add(&res);
        if res.result.is_ok() && hook.keeps_packet(code) {
            written.push(Packet {
                ts_ns: p.ts_ns,
                data: res.packet.clone(),
            });
        }
        if a.trace && !a.json {
            let pcs: Vec<String> = res.trace.iter().map(|pc| pc.to_string()).collect();
            println!(
                "packet {n}: -> {} ({code}), {} cycles, {} instructions, pcs {}",
                hook.code_name(code),
                res.cycles,
                res.retired,
                pcs.join(" ")
            );
        }
        if a.json {
            let mut v = json!({
                "packet": n,
                "engine": k,
                "code": code,
                "action": hook.code_name(code),
                "cycles": res.cycles,
                "instructions": res.retired,
                "fault": res.result.as_ref().err().map(|f| f.to_string()),
            });
            if a.trace {
                v["trace"] = json!(res.trace);
            }
            results.push(v);
        }
    }
    if let Some(path) = &a.out {
        nfkit_pcap::write_file(path, &written).map_err(super::pcap_error(path))?;
    }
    let stalls = |t: &Totals| {
        json!({
            "load_use": t.stalls.load_use,
            "div": t.stalls.div,
            "call": t.stalls.call,
            "packet_wait": t.stalls.rx,
            "shared_value_wait": t.stalls.values,
            "branch_flushes": t.stalls.flushes,
        })
    };
    if a.json {
        let counts: serde_json::Map<String, serde_json::Value> = counts
            .iter()
            .map(|(&c, &k)| (hook.code_name(c), json!(k)))
            .collect();
        let v = json!({
            "program": name,
            "section": e.section,
            "type": prog_type.name(),
            "packets": packets.len(),
            "counts": counts,
            "faults": faults,
            "written": a.out.as_ref().map(|_| written.len()),
            "cycles": all.cycles,
            "instructions": all.retired,
            "cycles_per_packet": all.per_packet(),
            "cycles_min": all.min,
            "cycles_max": all.max,
            "cpi": all.cpi(),
            "stalls": stalls(&all),
            "vm_check": checker.as_ref().map(|c| json!({
                "identical": c.identical,
                "differ": c.differ.len(),
                "differences": c.differ,
            })),
            "engines": per_engine.iter().enumerate().map(|(k, t)| json!({
                "engine": k, "packets": t.packets, "cycles": t.cycles, "cpi": t.cpi(),
            })).collect::<Vec<_>>(),
            "switch": switched.as_ref().map(|s| json!({
                "cycles": s.cycles,
                "packets_per_cycle": packets.len() as f64 / s.cycles.max(1) as f64,
                "outputs": s.outputs,
            })),
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{name} ({}) on {} packets, RTL core:",
            prog_type.name(),
            packets.len()
        );
        for (&c, &k) in &counts {
            println!("  {:<16} {k}", hook.code_name(c));
        }
        if let Some(path) = &a.out {
            println!("wrote {} packets to {}", written.len(), path.display());
        }
        println!(
            "cycles: {:.1} per packet (min {}, max {}), {} instructions, CPI {:.3}",
            all.per_packet(),
            all.min.unwrap_or(0),
            all.max,
            all.retired,
            all.cpi()
        );
        println!(
            "stall cycles: load-use {}, divide {}, call {}, packet wait {}, shared-value wait {}; mispredicted branches {} (one bubble each)",
            all.stalls.load_use,
            all.stalls.div,
            all.stalls.call,
            all.stalls.rx,
            all.stalls.values,
            all.stalls.flushes
        );
        if a.engines > 1 {
            for (k, t) in per_engine.iter().enumerate() {
                println!(
                    "  engine {k}: {} packets, {} cycles busy",
                    t.packets, t.cycles
                );
            }
        }
        if let Some(s) = &switched {
            let outs: Vec<String> = s.outputs.iter().map(|(o, k)| format!("{o} {k}")).collect();
            println!(
                "switch top ({} engines on port 0): {} cycles, {:.4} packets per cycle; copies out: {}",
                a.engines,
                s.cycles,
                packets.len() as f64 / s.cycles.max(1) as f64,
                outs.join(", ")
            );
        }
        if let Some(c) = &checker {
            println!(
                "VM check: {} packets identical (code, packet, instructions), {} differ",
                c.identical,
                c.differ.len()
            );
            for d in c.differ.iter().take(10) {
                println!("  {d}");
            }
        }
    }
    if checker.is_some_and(|c| !c.differ.is_empty()) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The capture's run through the switch top.
struct Switched {
    /// Per packet, in capture order: the engine (its index on port 0) and
    /// the run, with the bytes of its first copy out.
    runs: Vec<(usize, RunResult)>,
    /// Switch cycles from the first packet in to the last copy out.
    cycles: u64,
    /// Copies out per output (`port0`.., `controller`, `discard`).
    outputs: BTreeMap<String, u64>,
}

/// Offers every packet on port 0 of the switch top (back to back, as
/// fast as the port takes them, its first `engines` engines enabled) and
/// collects the runs.
fn run_switch(program: &Program, packets: &[Packet], engines: usize) -> anyhow::Result<Switched> {
    let mut sw = nfkit_rtl::Switch::new(program.clone())?;
    sw.set_engines_per_port(engines)?;
    for (i, p) in packets.iter().enumerate() {
        sw.offer(0, &p.data, p.ts_ns, 0)
            .with_context(|| format!("packet {}", i + 1))?;
    }
    let budget = (packets.len() as u64 + 1) * nfkit_rtl::core::DEFAULT_MAX_CYCLES;
    let run = sw.run(budget)?;
    let mut outputs: BTreeMap<String, u64> = BTreeMap::new();
    let mut bytes: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for o in run.outputs {
        let name = match o.output {
            nfkit_rtl::Output::Port(p) => format!("port{p}"),
            nfkit_rtl::Output::Controller => "controller".to_string(),
            nfkit_rtl::Output::Discard => "discard".to_string(),
        };
        *outputs.entry(name).or_default() += 1;
        bytes.entry(o.id).or_insert(o.bytes);
    }
    let runs = run
        .packets
        .into_iter()
        .map(|p| {
            let packet = bytes.remove(&p.id).unwrap_or_default();
            let r = RunResult {
                result: p.result,
                packet,
                cycles: p.cycles,
                retired: p.retired,
                version: p.version,
                stalls: p.stalls,
                trace: Vec::new(),
                map_ops: [0; 3],
                map_cycles: [0; 3],
                out_port: match p.redirect {
                    Some(nfkit_rtl::Redirect::Port(n)) => Some(n),
                    _ => None,
                },
                redirect: p.redirect,
                action: p.action,
                fsm_cycles: 0,
            };
            (p.engine % nfkit_rtl::switch::ENGINES, r)
        })
        .collect();
    Ok(Switched {
        runs,
        cycles: run.cycles,
        outputs,
    })
}

/// `--check`: the same packets in nfkit's VM, compared run by run.
struct Checker {
    vm: nfkit_vm::Vm,
    entry: usize,
    clock: std::sync::Arc<nfkit_vm::FixedClock>,
    identical: u64,
    differ: Vec<String>,
}

impl Checker {
    fn new(image: &Image, entry: usize) -> anyhow::Result<Checker> {
        let clock = std::sync::Arc::new(nfkit_vm::FixedClock::new(0));
        let config = nfkit_vm::VmConfig {
            ncpus: 1,
            clock: clock.clone(),
            rng: std::sync::Arc::new(nfkit_vm::SeqRng::new(1)),
            ..nfkit_vm::VmConfig::kernel()
        };
        let vm = nfkit_vm::Vm::new(image, config)
            .context("loading the program in the VM for --check")?;
        Ok(Checker {
            vm,
            entry,
            clock,
            identical: 0,
            differ: Vec::new(),
        })
    }

    fn compare(&mut self, n: usize, p: &Packet, hook: Hook, code: i64, res: &RunResult) {
        self.clock.set(p.ts_ns);
        let want = self.vm.run(
            self.entry,
            nfkit_vm::Context::Xdp(nfkit_vm::XdpMd::new(&p.data)),
            &nfkit_vm::RunOptions::default(),
        );
        let vm_code = hook.code(want.code());
        let why = if vm_code != code {
            Some(format!(
                "code: VM {}, RTL {}",
                hook.code_name(vm_code),
                hook.code_name(code)
            ))
        } else if want.result.is_ok() && want.packet != res.packet {
            Some("packet bytes differ".to_string())
        } else if want.result.is_ok() && want.insns != res.retired {
            Some(format!(
                "instructions: VM {}, RTL {}",
                want.insns, res.retired
            ))
        } else {
            None
        };
        match why {
            Some(w) => self.differ.push(format!("packet {n}: {w}")),
            None => self.identical += 1,
        }
    }
}

fn synth(a: SynthArgs) -> anyhow::Result<ExitCode> {
    let r = nfkit_rtl::synth::synth_with_clock().map_err(|e| anyhow!("{e}"))?;
    if a.json {
        let v = json!({
            "target": "xc7",
            "top": nfkit_rtl::sources::TOP,
            "luts": r.luts(),
            "lutram_cells": r.lutram_cells(),
            "ffs": r.ffs(),
            "bram36": r.bram36(),
            "dsps": r.dsps(),
            "cells": r.cells,
            "clock_mhz": r.timing.as_ref().map(|t| t.clock_mhz()),
            "clock_logic_only_mhz": r.timing.as_ref().map(|t| t.logic_only_mhz()),
            "clock_period_ns": r.timing.as_ref().map(|t| t.period_ps() as f64 / 1000.0),
            "clock_method": nfkit_rtl::synth::CLOCK_METHOD,
            "critical_path": r.timing.as_ref().map(|t| t.cells.clone()),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{r}");
    }
    Ok(ExitCode::SUCCESS)
}
