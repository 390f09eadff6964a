//! `nfkit prog test ... --vm [--engine jit|interp]`: the kernel's test
//! run ([`super::prog`]) in nfkit's userspace VM, so the two compare
//! directly. Per packet the program runs `--repeat` times on one
//! [`nfkit_vm::Runner`] (buffers reused), each run on the packet the
//! previous run left (the kernel's runs share one buffer: an XDP_TX that
//! rewrites the packet sees its own output next time), timed with
//! [`Instant`] around the loop; the report has the kernel's fields: the return value (the
//! last run's, as a u32), the mean ns per run, and the packet out (the
//! whole frame, as the kernel's test run gives it back). The control
//! plane's writes of a chain script are applied first and, with a pcap,
//! `nf_now()` and `bpf_ktime_get_ns` read each packet's capture time. A
//! run that faults is reported like a packet the kernel refuses (exit
//! code 3, the run goes on).

use super::prog::{report, Ran, Refused, TestArgs, EXIT_REFUSED};
use anyhow::{anyhow, bail, Context as _};
use nfkit_abi::{maps as abi_maps, Hook, NfConfig};
use nfkit_control::maps::text::hex;
use nfkit_control::runner::{engine_json, engine_line};
use nfkit_object::Image;
use nfkit_vm::{
    Context, Engine, EngineUse, FixedClock, RunOptions, Runner, SkBuff, Vm, VmConfig, XdpMd,
};
use serde_json::json;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Runs `entry` of `image` in the VM on every packet of `input`
/// (`pin_clock`: the packets have capture times) and reports as the
/// kernel's test run does.
pub fn run(
    a: &TestArgs,
    image: &Image,
    entry: &str,
    writes: &[(String, Vec<u8>, Vec<u8>)],
    input: &[(u64, Vec<u8>)],
    pin_clock: bool,
) -> anyhow::Result<ExitCode> {
    let shown = a.file.display().to_string();
    let Some(e) = image.entries.iter().find(|e| e.name == entry) else {
        bail!("{shown}: no program {entry}");
    };
    let prog_type = e.prog_type;
    let Some(hook) = super::hook_of(prog_type) else {
        bail!(
            "{shown}: {entry} is a {} program; the VM test-runs xdp, tc and socket filter programs",
            prog_type.name()
        );
    };
    let clock = Arc::new(FixedClock::new(0));
    let mut config = VmConfig::kernel().with_engine(a.engine.unwrap_or_else(Engine::best));
    if pin_clock {
        config.clock = clock.clone();
    }
    let vm = Vm::new(image, config).with_context(|| format!("{shown}: loading {entry}"))?;
    if let Some(why) = vm.entry_refused(entry) {
        bail!("{shown}: loading {entry}: {why}");
    }
    let ei = vm
        .entry_index(entry)
        .ok_or_else(|| anyhow!("{shown}: program {entry} not loaded"))?;
    for (m, k, v) in writes {
        let map = vm.map(m).ok_or_else(|| anyhow!("no map {m}"))?;
        map.update(k, v, 0).map_err(|e| anyhow!("map {m}: {e}"))?;
    }
    let engine = vm.engine(ei).cloned().unwrap_or(EngineUse::Interp);
    if !a.json {
        println!("{}", engine_line(&engine, 0, input.len()));
    }
    let mut runner = vm.runner();
    let mut rows = Vec::new();
    let mut refused = 0usize;
    for (i, (ts, data)) in input.iter().enumerate() {
        if pin_clock {
            clock.set(*ts);
            pin_now(&vm, *ts)?;
        }
        let (run, perf) = timed(&mut runner, ei, hook, data, a.repeat);
        if run.is_err() {
            refused += 1;
        }
        let mut row = report(prog_type, i + 1, data.len(), run, a.json);
        match row.as_mut() {
            Some(r) if !perf.is_empty() => {
                r["perf_events"] = perf.iter().map(super::run::perf_json).collect();
            }
            _ => {
                for p in &perf {
                    println!(
                        "  perf event {} cpu {}: {}",
                        p.map_name,
                        p.cpu,
                        hex(&p.data)
                    );
                }
            }
        }
        rows.extend(row);
    }
    if a.json {
        let mut v = json!({
            "program": entry,
            "packets": rows,
            "refused": refused,
            "maps": super::vm_maps_json(image, &vm),
        });
        engine_json(&mut v, &engine, 0);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if refused > 0 {
        eprintln!("{refused} of {} packets faulted in the VM", input.len());
    }
    Ok(if refused > 0 {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs entry `ei` `repeat` times (at least once) on `data`, each run on
/// the packet the previous one left, as the kernel's test run does (its
/// runs share one buffer); the last run's result with the mean time per
/// run, and its perf records.
fn timed(
    runner: &mut Runner,
    ei: usize,
    hook: Hook,
    data: &[u8],
    repeat: u32,
) -> (Result<Ran, Refused>, Vec<nfkit_vm::PerfEvent>) {
    let opts = RunOptions::default();
    let n = repeat.max(1);
    let start = Instant::now();
    let mut res = runner.run(ei, ctx(hook, data), &opts);
    for _ in 1..n {
        let packet = std::mem::take(&mut res.packet);
        res = runner.run(ei, ctx(hook, &packet), &opts);
    }
    let ns_per_run = (start.elapsed().as_nanos() / u128::from(n)) as u64;
    let perf = std::mem::take(&mut res.perf_events);
    let ran = match &res.result {
        Ok(r0) => Ok(Ran {
            retval: *r0 as u32,
            ns_per_run,
            data: res.packet,
        }),
        Err(e) => Err(Refused {
            by: "the VM",
            why: format!("fault: {e}"),
        }),
    };
    (ran, perf)
}

/// The context of a run at `hook` on packet `p`.
fn ctx(hook: Hook, p: &[u8]) -> Context<'_> {
    match hook {
        Hook::Xdp | Hook::Switch => Context::Xdp(XdpMd::new(p)),
        Hook::Tc | Hook::Socket => Context::Skb(SkBuff::new(p)),
    }
}

/// Pins `nf_now()` to `ts` in the VM's `nfkit_config` (when the program
/// has one), as the kernel's test run does.
fn pin_now(vm: &Vm, ts: u64) -> anyhow::Result<()> {
    let Some(m) = vm.map(abi_maps::CONFIG) else {
        return Ok(());
    };
    let key = 0u32.to_le_bytes();
    let old = m.lookup(&key).map_err(|e| anyhow!("nfkit_config: {e}"))?;
    let cfg = old
        .as_deref()
        .and_then(NfConfig::from_bytes)
        .unwrap_or_default();
    m.update(&key, &cfg.pinned_at(ts).to_bytes(), 0)
        .map_err(|e| anyhow!("nfkit_config: {e}"))
}
