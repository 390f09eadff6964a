//! The chain-language examples against the same logic written by hand in
//! C (`examples/c/NAME.c`, built by clang `-O2 -g -target bpf` at build
//! time by nfkit-corpus): both loaded into the VM or the kernel, the clock
//! pinned to each packet's time through `nfkit_config` (docs/abi.md 7;
//! the C programs read the same map), run packet by packet.
//!
//! Shared by `benches/chains.rs` (the `make bench` table) and
//! `tests/hand_c.rs` (same verdicts, packet by packet).
#![allow(dead_code)]

use nfkit_lang::link::MapWrite;
use nfkit_lang::{compile, Compiled, Options};
use nfkit_object::Image;
use nfkit_vm::{Context, Engine, RunOptions, Runner, Vm, VmConfig, XdpMd};
use std::path::{Path, PathBuf};

/// The examples that have a hand-written C version.
pub const EXAMPLES: [&str; 5] = [
    "ddos",
    "dscp_dispatch",
    "flow_limiter",
    "tcp_options",
    "port_stats",
];

/// The repository's `examples/`.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// One example: the script compiled, its pcap, its C version linked.
pub struct Example {
    pub name: &'static str,
    pub source: String,
    /// (timestamp ns, frame) of `examples/NAME.pcap`.
    pub packets: Vec<(u64, Vec<u8>)>,
    pub compiled: Compiled,
    /// The hand-written C program as an Image (for the VM).
    pub hand: Image,
    /// Its clang object on disk (for the kernel, through libbpf).
    pub hand_path: &'static str,
}

/// Loads example `name`: script, pcap, compiled chain, C program.
pub fn load_example(name: &'static str) -> Result<Example, String> {
    let dir = examples_dir();
    let source = std::fs::read_to_string(dir.join(format!("{name}.py")))
        .map_err(|e| format!("{name}.py: {e}"))?;
    let packets = nfkit_pcap::read_file(dir.join(format!("{name}.pcap")))
        .map_err(|e| format!("{name}.pcap: {e}"))?
        .into_iter()
        .map(|p| (p.ts_ns, p.data))
        .collect();
    let compiled = compile(name, &source, &Options::default()).map_err(|e| e.to_string())?;
    let entry = nfkit_corpus::example_c(name).ok_or(format!("no examples/c/{name}.c"))?;
    let obj = nfkit_object::read_object(entry.object, entry.path).map_err(|e| e.to_string())?;
    let hand = nfkit_object::link(&[obj]).map_err(|e| e.to_string())?;
    Ok(Example {
        name,
        source,
        packets,
        compiled,
        hand,
        hand_path: entry.path,
    })
}

/// Which of the two programs of an example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The script compiled by nfkit-lang (classifier, chains, NFs).
    Nfkit,
    /// The C program written by hand.
    HandC,
}

impl Example {
    /// (image, entry program, control-plane writes) of one side.
    pub fn program(&self, side: Side) -> (&Image, String, Vec<MapWrite>) {
        match side {
            Side::Nfkit => (
                &self.compiled.image,
                self.compiled.entry().unwrap_or_default().to_string(),
                self.compiled.control_plane(),
            ),
            // The C program's one XDP entry is named after the example.
            Side::HandC => (&self.hand, self.name.to_string(), Vec::new()),
        }
    }

    /// The pcap `passes` times in a row, each pass shifted in time past
    /// the previous one (so the pinned clock never steps back).
    pub fn replay(&self, passes: usize) -> Vec<(u64, &[u8])> {
        let first = self.packets.first().map(|p| p.0).unwrap_or(0);
        let last = self.packets.last().map(|p| p.0).unwrap_or(0);
        let span = last.saturating_sub(first) + 1_000_000_000;
        (0..passes as u64)
            .flat_map(|k| {
                self.packets
                    .iter()
                    .map(move |(ts, d)| (ts + k * span, d.as_slice()))
            })
            .collect()
    }
}

/// `nfkit_config` (struct nf_config) with the clock pinned at `now`.
pub fn pinned_config(old: Option<Vec<u8>>, now: u64) -> Vec<u8> {
    let cfg = old
        .as_deref()
        .and_then(nfkit_abi::NfConfig::from_bytes)
        .unwrap_or_default();
    cfg.pinned_at(now).to_bytes().to_vec()
}

/// One run's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The hook's return code.
    pub code: u64,
    /// The redirect target a helper set (ifindex).
    pub redirect: Option<u32>,
    /// The packet afterwards.
    pub packet: Vec<u8>,
    /// Instructions executed (VM only).
    pub insns: u64,
    /// The VM's error, if the run failed.
    pub error: Option<String>,
}

/// A program loaded into the VM.
pub struct VmProg {
    runner: Runner,
    entry: usize,
    config: Option<std::sync::Arc<nfkit_vm::maps::Map>>,
}

impl VmProg {
    /// Loads `side` of `ex` into a fresh VM (fresh maps) on the best
    /// engine and applies its control-plane writes.
    pub fn new(ex: &Example, side: Side) -> Result<VmProg, String> {
        VmProg::new_on(ex, side, Engine::best())
    }

    /// [`VmProg::new`] on `engine`.
    pub fn new_on(ex: &Example, side: Side, engine: Engine) -> Result<VmProg, String> {
        let (image, entry, writes) = ex.program(side);
        let config = VmConfig::kernel().with_engine(engine);
        let vm = Vm::new(image, config).map_err(|e| format!("{}: {e}", ex.name))?;
        for (m, k, v) in &writes {
            let map = vm.map(m).ok_or(format!("no map {m}"))?;
            map.update(k, v, 0).map_err(|e| format!("{m}: {e}"))?;
        }
        let idx = vm
            .entry_index(&entry)
            .ok_or(format!("{}: no entry {entry}", ex.name))?;
        Ok(VmProg {
            config: vm.map("nfkit_config").cloned(),
            runner: vm.runner(),
            entry: idx,
        })
    }

    /// Pins the clock at `now` (when the program has `nfkit_config`).
    pub fn pin(&self, now: u64) -> Result<(), String> {
        if let Some(m) = &self.config {
            let old = m.lookup(&0u32.to_le_bytes()).map_err(|e| e.to_string())?;
            m.update(&0u32.to_le_bytes(), &pinned_config(old, now), 0)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Runs one packet (the clock must be pinned first).
    pub fn run_only(&mut self, frame: &[u8]) -> nfkit_vm::RunResult {
        self.runner.run(
            self.entry,
            Context::Xdp(XdpMd::new(frame)),
            &RunOptions::default(),
        )
    }

    /// Pins the clock at `now` and runs one packet.
    pub fn run(&mut self, frame: &[u8], now: u64) -> Result<Outcome, String> {
        self.pin(now)?;
        let r = self.run_only(frame);
        Ok(Outcome {
            code: r.code(),
            redirect: r.redirect.as_ref().and_then(|r| match r {
                nfkit_vm::Redirect::Ifindex { ifindex, .. } => Some(*ifindex),
                nfkit_vm::Redirect::Map { ifindex, .. } => *ifindex,
                #[allow(unreachable_patterns)]
                _ => None,
            }),
            packet: r.packet.clone(),
            insns: r.insns,
            error: r.result.as_ref().err().map(|e| e.to_string()),
        })
    }
}

pub use nfkit_kernel::is_root;

/// A program loaded into the kernel.
pub struct KernelProg {
    loaded: nfkit_kernel::Loaded,
    entry: String,
}

/// One `BPF_PROG_TEST_RUN`: return value (of the last repetition), the
/// packet afterwards, the kernel's time per repetition (ns).
pub struct KernelRun {
    pub retval: u32,
    pub packet: Vec<u8>,
    pub ns: u32,
}

impl KernelProg {
    /// Loads `side` of `ex`: the compiled Image through nfkit's loader,
    /// the C object through libbpf, as users would.
    pub fn load(ex: &Example, side: Side) -> Result<KernelProg, String> {
        let (image, entry, writes) = ex.program(side);
        let loaded = match side {
            Side::Nfkit => nfkit_kernel::load_image(image, &nfkit_kernel::LoadOptions::default()),
            Side::HandC => nfkit_kernel::load_object_file(ex.hand_path),
        }
        .map_err(|e| format!("{} ({side:?}): {e}", ex.name))?;
        for (m, k, v) in &writes {
            let map = loaded.map(m).ok_or(format!("no map {m}"))?;
            map.update(k, v, 0).map_err(|e| format!("{m}: {e}"))?;
        }
        if loaded.prog(&entry).is_none() {
            return Err(format!("{}: no program {entry}", ex.name));
        }
        Ok(KernelProg { loaded, entry })
    }

    /// Pins the clock at `now` and test-runs `frame` `repeat` times.
    pub fn run(&self, frame: &[u8], now: u64, repeat: u32) -> Result<KernelRun, String> {
        if let Some(cfg) = self.loaded.map("nfkit_config") {
            let old = cfg.lookup(&0u32.to_le_bytes()).map_err(|e| e.to_string())?;
            cfg.update(&0u32.to_le_bytes(), &pinned_config(old, now), 0)
                .map_err(|e| e.to_string())?;
        }
        let prog = self
            .loaded
            .prog(&self.entry)
            .ok_or(format!("no program {}", self.entry))?;
        let t = nfkit_kernel::TestRun {
            repeat,
            ..nfkit_kernel::TestRun::packet(frame)
        };
        let out = prog.test_run(&t).map_err(|e| e.to_string())?;
        Ok(KernelRun {
            retval: out.retval,
            packet: out.data,
            ns: out.duration_ns,
        })
    }
}
