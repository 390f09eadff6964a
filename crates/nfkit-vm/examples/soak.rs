//! Soak: a million (by default) random and mutated hostile programs
//! through the JIT (`make soak`). None may escape the VM: after every
//! batch, sentinel buffers around VM memory (guard-paged buffers, heap
//! canaries, a never-run VM's maps) must hold their patterns, the inputs
//! the programs ran on must be unchanged, and every map of the soaked
//! VMs must still be well formed. Any escape that reaches a guard page
//! crashes the process, which fails `make soak`.
//!
//! `cargo run --release -p nfkit-vm --example soak -- --programs 1000000
//! [--seed N] [--batch N] [--threads N] [--engine jit|interp]`
//! (`--engine interp`: the same soak through the interpreter alone).

#[path = "../tests/common/mod.rs"]
mod common;

use anyhow::{bail, Context as _, Result};
use common::gen::{generated_programs, helper_free, maps, mutated_programs, packet_strategy};
use nfkit_isa::RawInsn;
use nfkit_object::{Image, MapType, ProgType};
use nfkit_vm::mem::GuardedBuf;
use nfkit_vm::{
    Context, Engine, EngineUse, PacketCtx, RunErrorKind, RunOptions, Vm, VmConfig, XdpMd,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::time::Instant;

const BUDGET: u64 = 3_000;
/// Bytes of each sentinel buffer.
const SENTINEL_LEN: usize = 64 * 1024;

struct Args {
    programs: u64,
    seed: u64,
    batch: u64,
    threads: u64,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        programs: 1_000_000,
        seed: 0x50a4_2026,
        batch: 20_000,
        threads: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        if flag == "--engine" {
            let interp = match value.as_str() {
                "jit" => false,
                "interp" => true,
                _ => bail!("--engine {value}: expected jit or interp"),
            };
            INTERP.store(interp, std::sync::atomic::Ordering::Relaxed);
            continue;
        }
        let n: u64 = value
            .parse()
            .with_context(|| format!("{flag} {value}: not a number"))?;
        match flag.as_str() {
            "--programs" => a.programs = n,
            "--seed" => a.seed = n,
            "--batch" => a.batch = n.max(1),
            "--threads" => a.threads = n.clamp(1, 64),
            _ => bail!("unknown option {flag} (--programs, --seed, --batch, --threads, --engine)"),
        }
    }
    Ok(a)
}

/// Counts of a soak.
#[derive(Default, Clone, Copy)]
struct Counts {
    programs: u64,
    undecodable: u64,
    refused: u64,
    accepted: u64,
    jit: u64,
    fallback: u64,
    ok: u64,
    faulted: u64,
    budget: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.programs += o.programs;
        self.undecodable += o.undecodable;
        self.refused += o.refused;
        self.accepted += o.accepted;
        self.jit += o.jit;
        self.fallback += o.fallback;
        self.ok += o.ok;
        self.faulted += o.faulted;
        self.budget += o.budget;
    }

    fn line(&self) -> String {
        format!(
            "{} programs (and {} cases that do not decode): {} refused, {} loads accepted ({} jit, {} interp fallback); runs: {} ok, {} faulted, {} out of budget",
            self.programs,
            self.undecodable,
            self.refused,
            self.accepted,
            self.jit,
            self.fallback,
            self.ok,
            self.faulted,
            self.budget
        )
    }
}

/// Memory that no program may reach: guard-paged buffers and heap
/// buffers with a pattern, and a VM that is never run with patterned maps.
struct Sentinels {
    guarded: Vec<GuardedBuf>,
    heap: Vec<Vec<u8>>,
    vm: Vm,
    maps: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
}

fn pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ 0xa5
}

impl Sentinels {
    fn new() -> Result<Sentinels> {
        let mut guarded = Vec::new();
        let mut heap = Vec::new();
        for _ in 0..4 {
            let g = GuardedBuf::new(SENTINEL_LEN).context("sentinel buffer")?;
            let bytes: Vec<u8> = (0..SENTINEL_LEN).map(pattern).collect();
            g.write(0, &bytes).context("sentinel write")?;
            guarded.push(g);
            heap.push(bytes);
        }
        let mut img = Image::from_insns(
            "sentinel",
            ProgType::Xdp,
            vec![
                nfkit_isa::Insn::lddw(nfkit_isa::Reg::R0, 2),
                nfkit_isa::Insn::Exit,
            ],
        );
        img.maps = maps();
        let vm = Vm::new(&img, VmConfig::kernel()).context("sentinel VM")?;
        for m in vm.maps().iter() {
            for k in 0..4u32 {
                let key: Vec<u8> = match m.name() {
                    "lpm" => [32u32.to_le_bytes(), k.to_le_bytes()].concat(),
                    _ => k.to_le_bytes().to_vec(),
                };
                let spec_value = m.lookup(&key).ok().flatten().map_or(16, |v| v.len());
                let value: Vec<u8> = (0..spec_value.max(8))
                    .map(|i| pattern(i + k as usize))
                    .collect();
                let _ = m.update(&key, &value, 0);
            }
        }
        let maps = map_states(&vm);
        Ok(Sentinels {
            guarded,
            heap,
            vm,
            maps,
        })
    }

    fn check(&self) -> Result<()> {
        for (i, g) in self.guarded.iter().enumerate() {
            if g.to_vec() != self.heap[i] {
                bail!("guard-paged sentinel buffer {i} changed");
            }
        }
        for (i, h) in self.heap.iter().enumerate() {
            if h.iter().enumerate().any(|(j, &b)| b != pattern(j)) {
                bail!("heap sentinel buffer {i} changed");
            }
        }
        if map_states(&self.vm) != self.maps {
            bail!("the sentinel VM's maps changed");
        }
        Ok(())
    }
}

fn map_states(vm: &Vm) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    vm.maps()
        .iter()
        .map(|m| {
            let mut e = m.entries();
            e.sort();
            e
        })
        .collect()
}

/// The soaked VM's maps are well formed: every key and value has its
/// map's sizes, hashes hold at most their capacity, arrays every index.
fn check_maps(vm: &Vm, img: &Image) -> Result<()> {
    for (m, spec) in vm.maps().iter().zip(&img.maps) {
        if matches!(spec.map_type, MapType::Ringbuf) {
            let _ = m.ringbuf_consume();
            continue;
        }
        let entries = m.entries();
        if entries.len() > spec.max_entries as usize {
            bail!(
                "map {} holds {} entries, more than {}",
                spec.name,
                entries.len(),
                spec.max_entries
            );
        }
        let value_len = match spec.map_type {
            MapType::PercpuArray => {
                (spec.value_size as usize).div_ceil(8) * 8 * vm.config().ncpus as usize
            }
            _ => spec.value_size as usize,
        };
        for (k, v) in &entries {
            if k.len() != spec.key_size as usize || v.len() != value_len {
                bail!("map {}: entry of {}/{} bytes", spec.name, k.len(), v.len());
            }
        }
        if spec.map_type == MapType::Array && entries.len() != spec.max_entries as usize {
            bail!("array map {} lost entries", spec.name);
        }
    }
    Ok(())
}

/// `--engine interp`: every program runs on the interpreter alone.
static INTERP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn config(conformance: bool) -> VmConfig {
    let base = if conformance {
        VmConfig::conformance()
    } else {
        VmConfig::kernel()
    };
    VmConfig {
        budget: BUDGET,
        ..base
    }
    .with_engine(if INTERP.load(std::sync::atomic::Ordering::Relaxed) {
        Engine::Interp
    } else {
        Engine::Jit
    })
}

/// Loads and runs one program in one profile, through the JIT (or the
/// interpreter, `--engine interp`).
fn soak_one(img: &Image, conformance: bool, data: &[u8], cpu: u32, c: &mut Counts) -> Result<()> {
    let vm = match Vm::new(img, config(conformance)) {
        Ok(vm) => vm,
        Err(_) => {
            c.refused += 1;
            return Ok(());
        }
    };
    c.accepted += 1;
    match vm.engine(0) {
        Some(EngineUse::Jit) => c.jit += 1,
        _ => c.fallback += 1,
    }
    if let Some(m) = vm.map("jmp") {
        let _ = m.update(&0u32.to_le_bytes(), &0u32.to_le_bytes(), 0);
    }
    let before = data.to_vec();
    let ctx = if conformance {
        Context::Raw(data)
    } else {
        Context::Xdp(XdpMd::new(data))
    };
    let res = vm.run(
        0,
        ctx,
        &RunOptions {
            cpu,
            ..RunOptions::default()
        },
    );
    if res.insns > BUDGET + 1 {
        bail!(
            "ran {} instructions, past the budget of {BUDGET}",
            res.insns
        );
    }
    match &res.result {
        Ok(_) => c.ok += 1,
        Err(e) if matches!(e.kind, RunErrorKind::Budget { .. }) => c.budget += 1,
        Err(_) => c.faulted += 1,
    }
    if data != before.as_slice() {
        bail!("the caller's input buffer changed");
    }
    if conformance && res.packet.len() != data.len() {
        bail!(
            "raw memory changed size: {} -> {}",
            data.len(),
            res.packet.len()
        );
    }
    if !conformance {
        run_packet_twice(&vm, data, cpu)?;
    }
    check_maps(&vm, img)
}

/// The program through a runner's `run_packet`, twice (the second run
/// takes the fast path; one that calls nothing runs on the caller's
/// buffer in place on the JIT): within the budget, and no byte of the
/// caller's allocation past the frame changed.
fn run_packet_twice(vm: &Vm, data: &[u8], cpu: u32) -> Result<()> {
    const SPARE: usize = 512;
    let opts = RunOptions {
        cpu,
        ..RunOptions::default()
    };
    let mut runner = vm.runner();
    for _ in 0..2 {
        let mut buf = Vec::with_capacity(data.len() + SPARE);
        buf.extend_from_slice(data);
        buf.resize(data.len() + SPARE, 0x5a);
        buf.truncate(data.len());
        let out = runner.run_packet(0usize, &mut buf, PacketCtx::Xdp, &opts);
        if out.insns > BUDGET + 1 {
            bail!("run_packet ran {} instructions, past the budget", out.insns);
        }
        if buf.capacity() >= data.len() + SPARE && buf.len() == data.len() {
            let spare = &buf.spare_capacity_mut()[..SPARE];
            // SAFETY: these bytes were written (0x5a) before the
            // truncation; nothing may have written them since.
            if spare.iter().any(|b| unsafe { b.assume_init() } != 0x5a) {
                bail!("run_packet wrote past the caller's frame");
            }
        }
    }
    Ok(())
}

/// One thread's share: `n` programs (that decode) from its own seed.
fn soak_thread(
    seed: u64,
    n: u64,
    batch: u64,
    sentinels: &Sentinels,
    progress: &dyn Fn(Counts),
) -> Result<Counts> {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed ^ (i as u64).wrapping_mul(0x9e37_79b9)).to_le_bytes());
    }
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    let strategy = (
        prop_oneof![generated_programs(), mutated_programs()],
        packet_strategy(),
        any::<u8>(),
    );
    let mut total = Counts::default();
    let mut c = Counts::default();
    // Cases that do not decode come on top of the `n` programs.
    let mut i = 0u64;
    while total.programs + c.programs < n {
        i += 1;
        let (slots, data, kind): (Vec<RawInsn>, Vec<u8>, u8) = strategy
            .new_tree(&mut runner)
            .map_err(|e| anyhow::anyhow!("cannot generate a program: {e}"))?
            .current();
        match nfkit_isa::decode_program(&slots) {
            Err(_) => c.undecodable += 1,
            Ok(insns) => {
                c.programs += 1;
                let mut img = Image::from_insns("p", ProgType::Xdp, insns);
                img.maps = maps();
                let cpu = u32::from(kind) % 4;
                soak_one(&img, false, &data, cpu, &mut c)
                    .with_context(|| format!("program {i} of seed {seed} (kernel XDP)"))?;
                img.insns = helper_free(&img.insns);
                soak_one(&img, true, &data, cpu, &mut c)
                    .with_context(|| format!("program {i} of seed {seed} (conformance)"))?;
            }
        }
        if c.programs == batch || total.programs + c.programs == n {
            sentinels
                .check()
                .with_context(|| format!("after program {i} of seed {seed}"))?;
            total.add(&c);
            progress(c);
            c = Counts::default();
        }
    }
    Ok(total)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let sentinels = Sentinels::new()?;
    let start = Instant::now();
    let done = std::sync::Mutex::new(Counts::default());
    let progress = |c: Counts| {
        if let Ok(mut d) = done.lock() {
            d.add(&c);
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "soak: {}/{} programs, {} accepted, {} refused, {} faulted, {} ok ({:.0} programs/s)",
                d.programs,
                args.programs,
                d.accepted,
                d.refused,
                d.faulted + d.budget,
                d.ok,
                d.programs as f64 / secs.max(1e-9)
            );
        }
    };
    let per = args.programs / args.threads;
    let results: Vec<Result<Counts>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|t| {
                let n = if t + 1 == args.threads {
                    args.programs - per * t
                } else {
                    per
                };
                let seed = args.seed.wrapping_add(t.wrapping_mul(0x1000_0000_0001));
                let (sentinels, progress) = (&sentinels, &progress);
                s.spawn(move || soak_thread(seed, n, args.batch, sentinels, progress))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a soak thread panicked")))
            })
            .collect()
    });
    let mut total = Counts::default();
    for r in results {
        total.add(&r?);
    }
    sentinels.check().context("at the end")?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "soak: {} in {secs:.1} s ({:.0} programs/s, seed {}): none escaped",
        total.line(),
        total.programs as f64 / secs.max(1e-9),
        args.seed
    );
    Ok(())
}
