//! The helper/map-heavy NF: the DDoS chain (`examples/ddos.py`, compiled
//! by nfkit-lang with the embedded NF catalogue) in the VM with its maps,
//! on the two paths of nfkit-bench's kernel DDoS bench:
//! * legit: a source that is not blacklisted, to a destination whose
//!   bucket is charged with 2^62 token units first (PASS);
//! * flood: a source that blacklisted itself with 100 packets (DROP, one
//!   in 10 REDIRECT).
//!
//! rbpf has no maps: its rows run a program making as many calls of a
//! trivial helper as the chain makes on that path (counted from a traced
//! run).

use crate::common::ip_frame;
use crate::rows::{nfkit_rows, Row};
use nfkit_vm::{Context, Engine, RunOptions, Vm, VmConfig, XdpMd};
use std::path::Path;

/// Token units written into the legit destination's bucket.
const CHARGE: u64 = 1 << 62;
const LEGIT_DST: [u8; 4] = [198, 18, 2, 1];

/// A 64-byte UDP frame from `src`:`sport` to `dst`:`dport`.
fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = ip_frame(64, 17, dport);
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f
}

/// The two paths: (name, frame).
pub fn paths() -> [(&'static str, Vec<u8>); 2] {
    [
        ("legit", udp4([198, 18, 1, 10], LEGIT_DST, 40000, 53)),
        ("flood", udp4([198, 18, 9, 9], [198, 18, 2, 2], 40001, 80)),
    ]
}

/// The chain loaded on `engine` with its control-plane writes done, and
/// the entry to run.
fn load(engine: Engine) -> Result<(Vm, String), String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ddos.py");
    let src = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let c = nfkit_lang::compile("ddos.py", &src, &nfkit_lang::Options::default())
        .map_err(|e| format!("ddos.py: {e}"))?;
    let entry = c.entry().ok_or("ddos.py: no classifier")?.to_string();
    let vm = Vm::new(&c.image, VmConfig::kernel().with_engine(engine))
        .map_err(|e| format!("ddos.py: VM refuses it: {e}"))?;
    for (m, k, v) in c.control_plane() {
        vm.map(&m)
            .ok_or_else(|| format!("control plane: no map {m}"))?
            .update(&k, &v, 0)
            .map_err(|e| format!("control plane: {m}: {e}"))?;
    }
    Ok((vm, entry))
}

fn run(vm: &Vm, entry: &str, frame: &[u8], trace: bool) -> nfkit_vm::RunResult {
    let opts = RunOptions {
        trace,
        ..RunOptions::default()
    };
    vm.run(entry, Context::Xdp(XdpMd::new(frame)), &opts)
}

/// Puts `vm` on `path`: charges the legit destination's bucket
/// (`nf_meter_tb_dst`: key {addr[16], rate, burst}, value {lock, pad,
/// tokens, last_ns}), or lets the flood source blacklist itself.
fn prepare(vm: &Vm, entry: &str, path: &str, frame: &[u8]) -> Result<(), String> {
    if path == "legit" {
        let mut key = vec![0u8; 10];
        key.extend([0xff, 0xff]);
        key.extend(LEGIT_DST);
        key.extend(100u32.to_le_bytes());
        key.extend(20u32.to_le_bytes());
        let mut value = vec![0u8; 8];
        value.extend(CHARGE.to_le_bytes());
        value.extend(0u64.to_le_bytes());
        let map = vm.map("nf_meter_tb_dst").ok_or("no map nf_meter_tb_dst")?;
        map.update(&key, &value, 0)
            .map_err(|e| format!("nf_meter_tb_dst: {e}"))
    } else {
        for _ in 0..100 {
            run(vm, entry, frame, false);
        }
        Ok(())
    }
}

/// One measured path of the chain: the nfkit rows, the verdict, and how
/// many helper calls one run makes.
pub struct DdosPath {
    pub name: &'static str,
    pub frame: Vec<u8>,
    pub rows: Vec<Row>,
    pub verdict: u64,
    pub helper_calls: usize,
    /// Instructions of one run (helper calls count as one).
    pub insns: u64,
}

/// Loads the chain on both engines for each path (a load per path and
/// engine, so each keeps its own map state).
pub fn load_paths() -> Result<Vec<DdosPath>, String> {
    let mut out = Vec::new();
    for (name, frame) in paths() {
        let (jit, entry) = load(Engine::Jit)?;
        let (interp, _) = load(Engine::Interp)?;
        for vm in [&jit, &interp] {
            prepare(vm, &entry, name, &frame)?;
        }
        let traced = run(&interp, &entry, &frame, true);
        let verdict = traced
            .r0()
            .ok_or_else(|| format!("ddos {name}: the run failed: {:?}", traced.result))?;
        let helper_calls = traced.trace.iter().filter(|s| s.helper.is_some()).count();
        let rows = nfkit_rows([(jit, "nfkit JIT"), (interp, "nfkit interp")], &entry)?;
        out.push(DdosPath {
            name,
            frame,
            rows,
            verdict,
            helper_calls,
            insns: traced.insns,
        });
    }
    Ok(out)
}
