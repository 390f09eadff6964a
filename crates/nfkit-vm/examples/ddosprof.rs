//! The DDoS chain (`examples/ddos.py`) on its legit path, N runs through
//! the in-place API on the engine named by the first argument, for
//! profiling the helper/map-heavy case (under `valgrind --tool=callgrind`
//! it gives host instructions per run).
//!
//! `cargo run --release -p nfkit-vm --example ddosprof -- jit|interp [N]`

use nfkit_vm::{Engine, PacketCtx, RunOptions, Vm, VmConfig};
use std::path::Path;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let engine = match std::env::args().nth(1).as_deref() {
        Some("interp") => Engine::Interp,
        _ => Engine::Jit,
    };
    let n: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ddos.py");
    let src = std::fs::read_to_string(&file)?;
    let c = nfkit_lang::compile("ddos.py", &src, &nfkit_lang::Options::default())?;
    let entry = c
        .entry()
        .ok_or_else(|| anyhow::anyhow!("no classifier"))?
        .to_string();
    let vm = Vm::new(&c.image, VmConfig::kernel().with_engine(engine))?;
    for (m, k, v) in c.control_plane() {
        if let Some(map) = vm.map(&m) {
            map.update(&k, &v, 0)?;
        }
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
    let opts = RunOptions::default();
    let start = Instant::now();
    let mut sum = 0u64;
    let mut p = frame.clone();
    for _ in 0..n {
        p.clear();
        p.extend_from_slice(&frame);
        sum += runner
            .run_packet(i, &mut p, PacketCtx::Xdp, &opts)
            .r0()
            .unwrap_or(0);
    }
    let ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
    println!("{engine:?}: {ns:.1} ns per run (r0 sum {sum})");
    Ok(())
}
