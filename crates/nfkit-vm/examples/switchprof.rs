//! The switch worker's call into the VM, for profiling: a chain compiled
//! for the switch hook (`pass`: every frame to port 2, as the traffic
//! bench's pass-through chain; `ddos`: `examples/ddos.py` on its legit
//! path, the destination's bucket charged), run N times through
//! `Runner::run_packet` with the `xdp_md` and run options the switch's
//! worker gives it (input port, queue, the worker's CPU, a pinned frame
//! clock). Under `valgrind --tool=callgrind` the difference of two run
//! counts gives host instructions per run.
//!
//! `cargo run --release -p nfkit-vm --example switchprof -- pass|ddos jit|interp [N]`

use nfkit_vm::ctx::XDP_HEADROOM;
use nfkit_vm::{Engine, FixedClock, PacketCtx, RunOptions, Vm, VmConfig, XdpMd};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const PASS_THROUGH: &str = r#"
from nf.classify import every_packet

def forward() -> u64:
    return REDIRECT(2)

every_packet(forward)
attach("sw0", "switch")
"#;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "ddos".into());
    let engine = match args.next().as_deref() {
        Some("interp") => Engine::Interp,
        _ => Engine::Jit,
    };
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = match which.as_str() {
        "pass" => PASS_THROUGH.to_string(),
        _ => std::fs::read_to_string(root.join("examples/ddos.py"))?,
    };
    let opts = nfkit_lang::Options {
        hook: Some(nfkit_abi::Hook::Switch),
        ..nfkit_lang::Options::default()
    };
    let c = nfkit_lang::compile_with("chain.py", &src, &opts, nfkit_lang::link::Inline::On)?;
    let entry = c
        .entry()
        .ok_or_else(|| anyhow::anyhow!("no classifier"))?
        .to_string();
    let mut config = VmConfig::kernel().with_engine(engine);
    config.ncpus = 2;
    let vm = Vm::new(&c.image, config)?;
    for (m, k, v) in c.control_plane() {
        if let Some(map) = vm.map(&m) {
            map.update(&k, &v, 0)?;
        }
    }
    // The legit destination's bucket charged (as nfkit-bench's vm bench).
    if let Some(m) = vm.map("nf_meter_tb_dst") {
        let mut k = vec![0u8; 10];
        k.extend([0xff, 0xff, 198, 18, 2, 1]);
        k.extend(100u32.to_le_bytes());
        k.extend(20u32.to_le_bytes());
        let mut v = vec![0u8; 8];
        v.extend((1u64 << 62).to_le_bytes());
        v.extend(0u64.to_le_bytes());
        m.update(&k, &v, 0)?;
    }
    let i = vm
        .entry_index(&entry)
        .ok_or_else(|| anyhow::anyhow!("no entry"))?;
    // A 64-byte UDP frame 198.18.1.10 -> 198.18.2.1:53.
    let mut frame = vec![0u8; 64];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame[14] = 0x45;
    frame[16..18].copy_from_slice(&50u16.to_be_bytes());
    frame[22] = 64;
    frame[23] = 17;
    frame[26..30].copy_from_slice(&[198, 18, 1, 10]);
    frame[30..34].copy_from_slice(&[198, 18, 2, 1]);
    frame[34..36].copy_from_slice(&40000u16.to_be_bytes());
    frame[36..38].copy_from_slice(&53u16.to_be_bytes());
    let mut runner = vm.runner();
    let run_opts = RunOptions {
        cpu: 1,
        clock: Some(Arc::new(FixedClock::new(1_000_000_000))),
        ..RunOptions::default()
    };
    let md = XdpMd {
        packet: &[],
        meta: &[],
        ingress_ifindex: 1,
        rx_queue_index: 0,
        egress_ifindex: 0,
        headroom: XDP_HEADROOM,
        tailroom: 4096usize
            .saturating_sub(XDP_HEADROOM + 320)
            .saturating_sub(frame.len()),
    };
    let mut p = frame.clone();
    let mut sum = 0u64;
    let mut insns = 0;
    let start = Instant::now();
    for _ in 0..n {
        p.clear();
        p.extend_from_slice(&frame);
        let out = runner.run_packet(i, &mut p, PacketCtx::XdpWith(&md), &run_opts);
        insns = out.insns;
        sum = sum.wrapping_add(out.r0().unwrap_or(0));
    }
    let ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
    println!("{which} {engine:?}: {ns:.1} ns per run, {insns} eBPF insns (r0 sum {sum:#x})");
    Ok(())
}
