//! `nfkit run FILE.o [--section NAME] --pcap IN.pcap [--out OUT.pcap]
//! [--trace] [--trace-packets LIST] [--json]`: runs an eBPF program in the
//! userspace VM on every packet of a capture.
//!
//! Prints how many packets got each return code (XDP_* names for XDP,
//! TC_ACT_* for tc, byte counts for socket filters), writes the packets
//! the program passes or transmits (XDP_PASS/TX/REDIRECT; TC_ACT_OK,
//! UNSPEC, RECLASSIFY, PIPE, REDIRECT; socket filters' non-zero verdicts,
//! cut to the kept length) with their modifications to OUT, and with
//! `--trace` every executed instruction and the registers it changed.
//!
//! Runs are reproducible: `bpf_ktime_get_ns` reads the packet's capture
//! timestamp, `bpf_get_prandom_u32` a fixed-seed sequence. A FILE that is
//! not an ELF object is taken as a chain script ([`super::run_script`]).

use anyhow::{anyhow, bail, Context as _};
use nfkit_object::{Image, ProgType};
use nfkit_pcap::Packet;
use nfkit_vm::{Context, FixedClock, RunOptions, RunResult, SeqRng, SkBuff, Vm, VmConfig, XdpMd};
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
    /// Packets to run on (classic pcap, Ethernet).
    #[arg(long, value_name = "IN.pcap")]
    pub pcap: PathBuf,
    /// Where to write the packets the program passes or transmits.
    #[arg(long, value_name = "OUT.pcap")]
    pub out: Option<PathBuf>,
    /// Print every executed instruction with its register changes.
    #[arg(long)]
    pub trace: bool,
    /// Packets to trace, 1-based (`1,3-5`); default all. Implies --trace.
    #[arg(long, value_name = "LIST")]
    pub trace_packets: Option<String>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    if !bytes.starts_with(b"\x7fELF") {
        return super::run_script::run(a);
    }
    let origin = a.file.display().to_string();
    let image = Image::from_elf(&bytes, &origin)?;
    let entry = pick_entry(&image, a.section.as_deref())?;
    let (name, prog_type) = (
        image.entries[entry].name.clone(),
        image.entries[entry].prog_type,
    );
    let hook = Hook::of(prog_type).ok_or_else(|| {
        anyhow!(
            "{name} is a {} program; nfkit run runs xdp, tc and socket filter programs",
            prog_type.name()
        )
    })?;
    let packets = nfkit_pcap::read_file(&a.pcap)?;
    let selection = match &a.trace_packets {
        Some(s) => Some(parse_ranges(s)?),
        None => None,
    };
    let tracing = a.trace || selection.is_some();

    let clock = Arc::new(FixedClock::new(0));
    let config = VmConfig {
        ncpus: 1,
        clock: clock.clone(),
        rng: Arc::new(SeqRng::new(1)),
        ..VmConfig::kernel()
    };
    let vm = Vm::new(&image, config).with_context(|| format!("loading {name}"))?;
    let mut runner = vm.runner();

    let mut counts: BTreeMap<i64, u64> = BTreeMap::new();
    let mut written: Vec<Packet> = Vec::new();
    let mut results = Vec::new();
    let mut faults = 0u64;
    for (i, p) in packets.iter().enumerate() {
        let n = i as u64 + 1;
        let trace = tracing
            && selection
                .as_ref()
                .is_none_or(|s| s.iter().any(|&(lo, hi)| lo <= n && n <= hi));
        clock.set(p.ts_ns);
        let ctx = match hook {
            Hook::Xdp => Context::Xdp(XdpMd::new(&p.data)),
            Hook::Tc | Hook::Socket => Context::Skb(SkBuff::new(&p.data)),
        };
        let res = runner.run(
            entry,
            ctx,
            &RunOptions {
                trace,
                ..RunOptions::default()
            },
        );
        let code = hook.code(&res);
        *counts.entry(code).or_default() += 1;
        if res.result.is_err() {
            faults += 1;
        }
        let out = hook.output(code, &res);
        if let Some(data) = &out {
            written.push(Packet {
                ts_ns: p.ts_ns,
                data: data.clone(),
            });
        }
        if a.json {
            results.push(packet_json(
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
            if trace {
                print_trace(n, p, code, hook, &res, &vm);
            }
        }
    }
    if let Some(path) = &a.out {
        nfkit_pcap::write_file(path, &written)?;
    }

    if a.json {
        let counts: serde_json::Map<String, serde_json::Value> = counts
            .iter()
            .map(|(&c, &k)| (hook.name(c), json!(k)))
            .collect();
        let v = json!({
            "program": name,
            "section": image.entries[entry].section,
            "type": prog_type.name(),
            "packets": packets.len(),
            "counts": counts,
            "faults": faults,
            "written": a.out.as_ref().map(|_| written.len()),
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{name} ({}) on {} packets:",
            prog_type.name(),
            packets.len()
        );
        for (&c, &k) in &counts {
            println!("  {:<16} {k}", hook.name(c));
        }
        if let Some(path) = &a.out {
            println!("wrote {} packets to {}", written.len(), path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The entry to run: the one whose section or name is `want`, or the only one.
fn pick_entry(image: &Image, want: Option<&str>) -> anyhow::Result<usize> {
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

/// The hooks `nfkit run` can feed packets to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hook {
    Xdp,
    Tc,
    Socket,
}

const XDP_CODES: [&str; 5] = [
    "XDP_ABORTED",
    "XDP_DROP",
    "XDP_PASS",
    "XDP_TX",
    "XDP_REDIRECT",
];
const TC_CODES: [&str; 9] = [
    "TC_ACT_OK",
    "TC_ACT_RECLASSIFY",
    "TC_ACT_SHOT",
    "TC_ACT_PIPE",
    "TC_ACT_STOLEN",
    "TC_ACT_QUEUED",
    "TC_ACT_REPEAT",
    "TC_ACT_REDIRECT",
    "TC_ACT_TRAP",
];

impl Hook {
    fn of(t: ProgType) -> Option<Hook> {
        match t {
            ProgType::Xdp => Some(Hook::Xdp),
            ProgType::SchedCls | ProgType::SchedAct => Some(Hook::Tc),
            ProgType::SocketFilter => Some(Hook::Socket),
            _ => None,
        }
    }

    /// The verdict as the hook reads it: XDP and tc read the low 32 bits
    /// (tc as a signed int), socket filters an unsigned byte count.
    fn code(self, res: &RunResult) -> i64 {
        let v = res.code();
        match self {
            Hook::Tc => v as u32 as i32 as i64,
            Hook::Xdp | Hook::Socket => v as u32 as i64,
        }
    }

    fn name(self, code: i64) -> String {
        let named = match self {
            Hook::Xdp => usize::try_from(code).ok().and_then(|c| XDP_CODES.get(c)),
            Hook::Tc if code == -1 => Some(&"TC_ACT_UNSPEC"),
            Hook::Tc => usize::try_from(code).ok().and_then(|c| TC_CODES.get(c)),
            Hook::Socket if code == 0 => return "drop".into(),
            Hook::Socket => return format!("keep {code} bytes"),
        };
        named.map_or_else(|| format!("unknown ({code})"), |n| (*n).to_string())
    }

    /// The packet the hook lets through or sends, if any.
    fn output(self, code: i64, res: &RunResult) -> Option<Vec<u8>> {
        match self {
            Hook::Xdp if res.result.is_ok() && (2..=4).contains(&code) => Some(res.packet.clone()),
            Hook::Tc if res.result.is_ok() && matches!(code, -1 | 0 | 1 | 3 | 7) => {
                Some(res.packet.clone())
            }
            Hook::Socket if res.result.is_ok() && code > 0 => {
                // The verdict counts bytes from the network header.
                let keep = (nfkit_vm::ctx::ETH_HLEN as u64).saturating_add(code as u64);
                let keep = usize::try_from(keep)
                    .unwrap_or(usize::MAX)
                    .min(res.packet.len());
                res.packet.get(..keep).map(<[u8]>::to_vec)
            }
            _ => None,
        }
    }
}

fn fmt_insn(insn: Option<&nfkit_isa::Insn>) -> String {
    match insn {
        Some(i) => nfkit_isa::disasm::format_insn(i, nfkit_isa::asm::Syntax::Llvm),
        None => "?".into(),
    }
}

fn print_trace(n: u64, p: &Packet, code: i64, hook: Hook, res: &RunResult, vm: &Vm) {
    println!("packet {n} ({} bytes):", p.data.len());
    for s in &res.trace {
        let changes: Vec<String> = s
            .changes
            .iter()
            .map(|c| format!("r{} {:#x} -> {:#x}", c.reg, c.old, c.new))
            .collect();
        let line = format!(
            "  {:>5}  {:<24} {:<40} {}",
            s.slot,
            vm.location(s.op),
            fmt_insn(s.insn.as_ref()),
            changes.join(", ")
        );
        println!("{}", line.trim_end());
    }
    println!(
        "  -> {} ({code}), {} instructions",
        hook.name(code),
        res.insns
    );
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
        "verdict": hook.name(code),
        "insns": res.insns,
        "error": res.result.as_ref().err().map(|e| e.to_string()),
        "out_len": out.map(Vec::len),
    });
    if let Some(r) = &res.redirect {
        v["redirect"] = json!(format!("{r:?}"));
    }
    if !res.printk.is_empty() {
        v["printk"] = json!(res.printk);
    }
    if trace {
        v["trace"] = res
            .trace
            .iter()
            .map(|s| {
                json!({
                    "slot": s.slot,
                    "at": vm.location(s.op),
                    "insn": fmt_insn(s.insn.as_ref()),
                    "changes": s.changes.iter().map(|c| json!({"reg": c.reg, "old": c.old, "new": c.new})).collect::<Vec<_>>(),
                })
            })
            .collect();
    }
    v
}
