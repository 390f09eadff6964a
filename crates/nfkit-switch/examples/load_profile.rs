//! Loads the swap bench's chain object again and again the way an
//! object update does (read, then a VM keeping the old one's maps), and
//! prints each stage's median: a target for `perf record` when cutting
//! the load path (docs/update.md, "Swap time"). Arguments: the number
//! of loads (default 2000).

use nfkit_control::runner::ScriptVm;
use nfkit_vm::{Engine, VmConfig};
use std::time::{Duration, Instant};

fn object(mark: char) -> anyhow::Result<Vec<u8>> {
    let source = format!(
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   Packet.write_u8(46, u8({}))\n\
         \x20   return TX\n\
         every_packet(main)\n",
        mark as u32
    );
    let opts = nfkit_lang::Options {
        hook: Some(nfkit_abi::Hook::Switch),
        ..nfkit_lang::Options::default()
    };
    let c = nfkit_lang::compile(&format!("{mark}.py"), &source, &opts)?;
    Ok(nfkit_lang::chain_object::write(&c, &opts)?)
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args().nth(1).map_or(Ok(2000), |s| s.parse())?;
    let objects = [object('a')?, object('b')?];
    let mut config = VmConfig::kernel().with_engine(Engine::Jit);
    config.ncpus = 2;
    let first = nfkit_lang::chain_object::read(&objects[0], "a.o")?;
    let mut old = ScriptVm::from_object(&first, config.clone(), None)?;
    let (mut decode, mut check, mut maps, mut jit, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let t0 = Instant::now();
        let o = nfkit_lang::chain_object::read_for_load(&objects[i % 2], "x.o")?;
        let t1 = Instant::now();
        let vm = ScriptVm::from_object(&o, config.clone(), Some(&old))?;
        total.push(t0.elapsed());
        decode.push(t1 - t0);
        let t = vm.vm.load_times();
        check.push(t.check);
        maps.push(t.maps);
        jit.push(t.jit);
        old = vm;
    }
    println!(
        "{n} loads, p50 µs: decode {:.1} check {:.1} maps {:.1} jit {:.1} total {:.1}",
        median(&mut decode),
        median(&mut check),
        median(&mut maps),
        median(&mut jit),
        median(&mut total)
    );
    Ok(())
}
