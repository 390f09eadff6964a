//! Scratch: live runs per second by concurrency.
use nfkit_traffic::xdp::{Generator, Template};
use std::time::Instant;

fn main() {
    let dev = std::env::args().nth(1).unwrap_or_else(|| "lo".into());
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    let t = Template {
        frame: vec![0xffu8; 60],
        stamp_off: 0,
        csum_off: 0,
        csum: 0,
        keep: false,
    };
    let g = Generator::new(&[t], &[0], ifindex).unwrap();
    println!("probe {:?}", g.probe().unwrap());
    let r = g.runner().unwrap();
    for threads in [1, 4, 16] {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..(32 / threads) {
                        r.run(100, 0).unwrap();
                    }
                });
            }
        });
        println!("{threads} threads: {:.1} calls/s", 32.0 / t0.elapsed().as_secs_f64());
    }
}
