//! `nfkit prog test OBJ_OR_SCRIPT --packet FILE|--pcap FILE [--repeat N]
//! [--json]`: loads the program (a chain script is compiled, its control
//! plane written) and runs it in the kernel with `BPF_PROG_TEST_RUN`,
//! printing per packet the verdict (named, and kept or dropped, as
//! [`nfkit_abi::Hook`] says, like `nfkit run`), the output packet (hex)
//! and the nanoseconds per run. With a pcap, `nf_now()` is pinned to each
//! packet's capture time (as `nfkit run` does in the VM). A packet the
//! kernel refuses (a frame under 14 bytes; for TC, a cut IP header) is
//! reported as refused, with the kernel's error, and the run goes on:
//! exit code 0 when every packet ran, [`EXIT_REFUSED`] (3) when some
//! were refused, 1 when the run could not be made at all.
//! `bpf_perf_event_output` records are read from a perf buffer on each
//! `perf_event_array` and shown per packet (`perf_events` with `--json`;
//! the kernel pads each sample to 8-byte words with its size word).
//!
//! With `--vm [--engine jit|interp]` the same command runs the program
//! in the userspace VM instead ([`super::prog_vm`]): the same repeat
//! count, the same fields (return value, ns per run, packet out), so
//! the two are directly comparable.

use super::hook_of;
use anyhow::{anyhow, bail, Context};
use nfkit_control::maps::text::{decode_hex, hex};
use nfkit_kernel::{load_image, LoadOptions, TestRun};
use nfkit_object::ProgType;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run a program in the kernel on packets (BPF_PROG_TEST_RUN), or
    /// with --vm in nfkit's VM (same repeats, same fields).
    ///
    /// A packet the kernel refuses (a frame under 14 bytes; for TC, a
    /// cut IP header) is reported as refused, with the kernel's error,
    /// and the run goes on. Exit code: 0 every packet ran, 3 the run
    /// completed but some packets were refused (--vm: faulted), 1 no
    /// run (the object or the packets could not be used, the program was
    /// rejected), 2 usage.
    Test(TestArgs),
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// An eBPF ELF object or a chain script.
    pub file: PathBuf,
    /// One packet: raw bytes, or hex text.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "pcap",
        required_unless_present = "pcap"
    )]
    pub packet: Option<PathBuf>,
    /// Packets from a capture (classic pcap, Ethernet).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Runs per packet (the time is the mean of them).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Program of an object with several: section or function name.
    #[arg(long, value_name = "NAME")]
    pub section: Option<String>,
    /// Run the program as this type, whatever its section's name says
    /// (legacy names such as `xdp_foo`, `prog`, `xdp_sock`).
    #[arg(long = "type", value_name = "TYPE")]
    pub prog_type: Option<super::RunType>,
    #[arg(long)]
    pub json: bool,
    /// Run in nfkit's userspace VM instead of the kernel (same repeat
    /// count, same fields: return value, ns per run, packet out).
    #[arg(long)]
    pub vm: bool,
    /// With --vm: the VM's engine, `jit` (the default where there is
    /// one, x86-64) or `interp`.
    #[arg(long, value_name = "jit|interp", value_parser = super::parse_engine, requires = "vm")]
    pub engine: Option<nfkit_vm::Engine>,
}

/// What a test run loads: the Image, its entry's name, and the control
/// plane's map writes (a chain script's; none for an object).
pub type Target = (nfkit_object::Image, String, Vec<(String, Vec<u8>, Vec<u8>)>);

/// The name of return code `retval` of a `t` program, as
/// [`nfkit_abi::Hook::code_name`] gives it (the number for other types),
/// and whether the hook keeps the packet.
pub fn verdict(t: ProgType, retval: u32) -> (String, Option<bool>) {
    match hook_of(t) {
        Some(h) => {
            let code = h.code(u64::from(retval));
            (h.code_name(code), Some(h.keeps_packet(code)))
        }
        None => (retval.to_string(), None),
    }
}

/// A packet and its capture time in ns.
type Timed = (u64, Vec<u8>);

/// Packets to run, and whether they have capture times.
pub fn packets(a: &TestArgs) -> anyhow::Result<(Vec<Timed>, bool)> {
    if let Some(p) = &a.pcap {
        let pk = nfkit_pcap::read_file(p).map_err(super::pcap_error(p))?;
        return Ok((pk.into_iter().map(|p| (p.ts_ns, p.data)).collect(), true));
    }
    let Some(p) = &a.packet else {
        bail!("give --packet FILE or --pcap FILE");
    };
    let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    let text: Option<String> = std::str::from_utf8(&bytes)
        .ok()
        .map(|s| s.chars().filter(|c| !c.is_ascii_whitespace()).collect());
    let data = text
        .and_then(|t| decode_hex(&t).filter(|b| !b.is_empty()))
        .unwrap_or(bytes);
    Ok((vec![(0, data)], false))
}

/// The program `a` names: an object's entry (by `--section` when it
/// has several, as `--type` says), or a chain script compiled (`None`
/// when it has errors, which are printed).
fn target(a: &TestArgs) -> anyhow::Result<Option<Target>> {
    let shown = a.file.display().to_string();
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {shown}"))?;
    Ok(Some(if bytes.starts_with(b"\x7fELF") {
        let mut image = super::read_image(&bytes, &shown, a.prog_type)?;
        let at = match &a.section {
            Some(s) => image
                .entries
                .iter()
                .position(|e| e.name == *s || e.section == *s)
                .ok_or_else(|| anyhow!("{shown}: no program `{s}`"))?,
            None => match image.entries.len() {
                1 => 0,
                0 => bail!("{shown}: no entry program"),
                _ => bail!("{shown}: several programs: say which with --section"),
            },
        };
        if let Some(t) = a.prog_type {
            image.entries[at].prog_type = t.prog_type();
        }
        let entry = image.entries[at].name.clone();
        (image, entry, Vec::new())
    } else {
        if a.prog_type.is_some() {
            bail!("{shown}: --type applies to ELF objects, not chain scripts");
        }
        let source = String::from_utf8(bytes).with_context(|| format!("{shown}: not UTF-8"))?;
        let Some(c) = super::deploy::compile_script(&shown, &source, &[], None)? else {
            return Ok(None);
        };
        let entry = c
            .entry()
            .ok_or_else(|| anyhow!("{shown}: the script has no classifier"))?
            .to_string();
        let writes = c.control_plane();
        (c.image, entry, writes)
    }))
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    let Command::Test(a) = c;
    let shown = a.file.display().to_string();
    let Some((image, entry, writes)) = target(&a)? else {
        return Ok(ExitCode::from(1));
    };
    let (input, pin_clock) = packets(&a)?;
    if a.vm {
        return super::prog_vm::run(&a, &image, &entry, &writes, &input, pin_clock);
    }
    // Test runs touch the calling CPU's per-CPU slots: stay on one CPU.
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let loaded = load_image(
        &image,
        &LoadOptions {
            entries: Some(vec![entry.clone()]),
            ..LoadOptions::default()
        },
    )
    .map_err(|e| anyhow!("{shown}: {e}"))?;
    for (m, k, v) in &writes {
        let map = loaded.map(m).ok_or_else(|| anyhow!("no map {m}"))?;
        map.update(k, v, 0)?;
    }
    let prog = loaded
        .prog(&entry)
        .ok_or_else(|| anyhow!("{shown}: program {entry} not loaded"))?;
    let config = loaded.map("nfkit_config").filter(|_| pin_clock);
    let perf =
        nfkit_kernel::perf::PerfReader::open(&loaded).map_err(|e| anyhow!("{shown}: {e}"))?;
    let mut rows = Vec::new();
    let mut refused = 0usize;
    for (i, (ts, data)) in input.iter().enumerate() {
        if let Some(cfg) = &config {
            pin_now(cfg, *ts)?;
        }
        let run = prog
            .test_run(&TestRun {
                repeat: a.repeat,
                ..TestRun::packet(data)
            })
            .map(|r| Ran {
                retval: r.retval,
                ns_per_run: u64::from(r.duration_ns),
                data: r.data,
            })
            .map_err(|e| Refused {
                by: "the kernel",
                why: e.to_string(),
            });
        if run.is_err() {
            refused += 1;
        }
        let mut row = report(prog.prog_type(), i + 1, data.len(), run, a.json);
        let records = perf.drain();
        match row.as_mut() {
            Some(r) if !records.is_empty() => {
                r["perf_events"] = records
                    .iter()
                    .map(|e| json!({"map": e.map, "cpu": e.cpu, "data": hex(&e.data)}))
                    .collect();
            }
            _ => {
                for e in &records {
                    println!("  perf event {} cpu {}: {}", e.map, e.cpu, hex(&e.data));
                }
            }
        }
        rows.extend(row);
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "program": entry,
                "packets": rows,
                "refused": refused,
                "maps": super::kernel_maps_json(&image, &loaded),
            }))?
        );
    } else if refused > 0 {
        eprintln!("{refused} of {} packets refused by the kernel", input.len());
    }
    Ok(if refused > 0 {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Exit code of a run that completed but in which the kernel refused
/// some packets (`BPF_PROG_TEST_RUN` failed for them).
pub const EXIT_REFUSED: u8 = 3;

/// Pins `nf_now()` to `ts` in the program's `nfkit_config`.
fn pin_now(cfg: &nfkit_kernel::KMap, ts: u64) -> anyhow::Result<()> {
    let mut v = cfg.lookup(&0u32.to_le_bytes())?.unwrap_or_default();
    v.resize(40, 0);
    v.splice(20..24, 1u32.to_le_bytes());
    v.splice(24..32, ts.to_le_bytes());
    cfg.update(&0u32.to_le_bytes(), &v, 0)?;
    Ok(())
}

/// One packet's test run, in the kernel or the VM.
pub struct Ran {
    /// The return value (of the last run), as the kernel reports it.
    pub retval: u32,
    /// Mean time of one run.
    pub ns_per_run: u64,
    /// The packet afterwards.
    pub data: Vec<u8>,
}

/// A packet that did not run: the kernel refused it, or the VM faulted.
pub struct Refused {
    /// `the kernel` or `the VM`.
    pub by: &'static str,
    pub why: String,
}

/// Prints (text) or returns (JSON) the result of packet `n` (`len`
/// bytes in): its verdict and output, or why it did not run.
pub fn report(
    t: ProgType,
    n: usize,
    len: usize,
    run: Result<Ran, Refused>,
    as_json: bool,
) -> Option<serde_json::Value> {
    let r = match run {
        Ok(r) => r,
        Err(Refused { by, why }) => {
            if as_json {
                return Some(json!({
                    "packet": n, "refused": true, "bytes_in": len, "error": why,
                }));
            }
            println!("packet {n}: refused by {by} ({len} bytes in): {why}");
            return None;
        }
    };
    let (verdict, kept) = verdict(t, r.retval);
    if as_json {
        return Some(json!({
            "packet": n, "refused": false, "retval": r.retval, "verdict": verdict, "kept": kept,
            "ns_per_run": r.ns_per_run, "out": hex(&r.data),
        }));
    }
    let fate = match kept {
        Some(true) => ", kept",
        Some(false) => ", dropped",
        None => "",
    };
    println!(
        "packet {n}: {verdict} ({}){fate}, {} ns/run, {} bytes out",
        r.retval,
        r.ns_per_run,
        r.data.len()
    );
    println!("  {}", hex(&r.data));
    None
}

#[cfg(test)]
mod tests {
    use super::verdict;
    use nfkit_abi::Hook;
    use nfkit_object::ProgType;

    #[test]
    fn verdicts_follow_the_abi() {
        for code in -1i64..=9 {
            let retval = code as i32 as u32;
            let want = (Hook::Tc.code_name(code), Some(Hook::Tc.keeps_packet(code)));
            assert_eq!(verdict(ProgType::SchedCls, retval), want, "tc {code}");
            assert_eq!(verdict(ProgType::SchedAct, retval), want, "tc {code}");
        }
        assert_eq!(verdict(ProgType::SchedCls, 8).0, "TC_ACT_TRAP");
        assert_eq!(
            verdict(ProgType::SchedCls, 4),
            ("TC_ACT_STOLEN".into(), Some(false))
        );
        for code in 0..=5 {
            let want = (
                Hook::Xdp.code_name(code),
                Some(Hook::Xdp.keeps_packet(code)),
            );
            assert_eq!(verdict(ProgType::Xdp, code as u32), want, "xdp {code}");
        }
        assert_eq!(
            verdict(ProgType::SocketFilter, 0),
            ("drop".into(), Some(false))
        );
        assert_eq!(verdict(ProgType::Kprobe, 3), ("3".into(), None));
    }
}
