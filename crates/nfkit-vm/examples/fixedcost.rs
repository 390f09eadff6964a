//! The fixed cost of a run, for profiling: `r0 = 2; exit` on a 64-byte
//! packet through the in-place API (`Runner::run_packet`), N times, on
//! the engine named by the first argument.
//!
//! `cargo run --release -p nfkit-vm --example fixedcost -- jit|interp [N]`;
//! under `valgrind --tool=callgrind` it gives host instructions per run.

use nfkit_object::{Image, ProgType};
use nfkit_vm::{Engine, PacketCtx, RunOptions, Vm, VmConfig};
use std::time::Instant;

fn main() -> Result<(), String> {
    let engine = match std::env::args().nth(1).as_deref() {
        Some("interp") => Engine::Interp,
        _ => Engine::Jit,
    };
    let n: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let insns = nfkit_isa::assemble("r0 = 2\nexit\n", None).map_err(|e| e.to_string())?;
    let image = Image::from_insns("fixedcost", ProgType::Xdp, insns);
    let config = VmConfig {
        budget: u64::MAX,
        ..VmConfig::kernel()
    }
    .with_engine(engine);
    let vm = Vm::new(&image, config).map_err(|e| e.to_string())?;
    let mut runner = vm.runner();
    let opts = RunOptions::default();
    let mut packet = vec![0u8; 64];
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..n {
        sum += runner
            .run_packet(0usize, &mut packet, PacketCtx::Xdp, &opts)
            .r0()
            .unwrap_or(0);
    }
    let ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
    println!("{engine:?}: {ns:.1} ns per run (r0 sum {sum})");
    Ok(())
}
