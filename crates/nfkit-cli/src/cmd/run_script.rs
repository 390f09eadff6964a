//! `nfkit run SCRIPT --pcap IN.pcap [--out OUT.pcap] [--trace] [--json]`:
//! compiles a chain script and runs the whole of it (classifier, chains,
//! NFs) on every packet in the VM, with `nf_now()` pinned to each
//! packet's capture time; prints per chain and per verdict counts and
//! every map of the run, typed (the script's, then its NFs': `nf_maps` in
//! JSON) at the end (per packet too with `--trace`), then the engine
//! that ran it (`--engine`, as for objects: [`super::run`]).

use anyhow::{anyhow, Context};
use nfkit_control::runner::run_capture_on;
use nfkit_pcap::Packet;
use nfkit_vm::Engine;
use std::process::ExitCode;

/// Runs the chain script `args.file` on the capture.
pub fn run(args: super::run::Args) -> anyhow::Result<ExitCode> {
    let shown = args.file.display().to_string();
    if args.prog_type.is_some() {
        anyhow::bail!("{shown}: --type applies to ELF objects, not chain scripts");
    }
    let source = std::fs::read_to_string(&args.file).with_context(|| format!("reading {shown}"))?;
    let compiled = super::compile::compile_or_report(&shown, &source, &[])?;
    let Some(compiled) = compiled else {
        return Ok(ExitCode::from(1));
    };
    let packets = nfkit_pcap::read_file(&args.pcap).map_err(super::pcap_error(&args.pcap))?;
    let input: Vec<(u64, Vec<u8>)> = packets.into_iter().map(|p| (p.ts_ns, p.data)).collect();
    let engine = args.engine.unwrap_or_else(Engine::best);
    let report = run_capture_on(&compiled, &input, args.trace, engine)
        .map_err(|e| anyhow!("{shown}: {e}"))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json(args.trace))?
        );
    } else {
        print!("{}", report.text(args.trace));
        println!("{}", report.engine_line());
    }
    if let Some(out) = &args.out {
        let pk: Vec<Packet> = report
            .out
            .iter()
            .map(|(ts, d)| Packet::new(*ts, d.clone()))
            .collect();
        nfkit_pcap::write_file(out, &pk).map_err(super::pcap_error(out))?;
    }
    Ok(ExitCode::SUCCESS)
}
