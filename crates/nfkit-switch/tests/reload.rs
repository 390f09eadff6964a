//! Hitless reloads: 1000 reloads alternating two versions of a chain
//! while numbered frames flow (one and two workers, the second through
//! flow-hash dispatch): every frame goes out exactly once and is counted
//! in exactly one version, frames marked by each version match that
//! version's counters, a per-CPU counter map keeps counting across
//! versions, a script that does not load is refused and counted while
//! forwarding goes on, and an idle switch reloads too. Prints the
//! reload time distribution (`--nocapture`).

mod common;
use common::numbered::{assert_each_once, percentile, Traffic};
use common::*;
use nfkit_switch::{Switch, SwitchConfig};
use std::sync::Arc;
use std::time::Duration;

/// Marks each frame (payload byte 4) with `mark`, counts it per CPU and
/// sends it back out (TX).
fn script(mark: char) -> String {
    format!(
        "from nf.classify import every_packet\n\
         hits = PercpuArrayMap(u64, 2)\n\
         def main() -> u64:\n\
         \x20   hits[0] += 1\n\
         \x20   Packet.write_u8(46, u8({}))\n\
         \x20   return TX\n\
         every_packet(main)\n",
        mark as u32
    )
}

/// Frames the source gives per millisecond, and in all.
const RATE: u64 = 1000;
const CAP: u64 = 4_000_000;

/// `reloads` reloads alternating versions B and A (A first) under
/// traffic with `workers` workers and `queues` receive queues.
fn reloads_under_traffic(workers: usize, queues: usize, reloads: usize) {
    let a = compile_switch("a.py", &script('A'));
    let b = compile_switch("b.py", &script('B'));
    let other_hook = {
        let opts = nfkit_lang::Options {
            hook: Some(nfkit_abi::Hook::Xdp),
            ..nfkit_lang::Options::default()
        };
        nfkit_lang::compile("x.py", &script('X'), &opts).expect("compile")
    };
    let (traffic, port) = Traffic::port(workers, queues, RATE, CAP);
    let cfg = SwitchConfig {
        workers,
        pin: false,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&a, vec![port], &cfg).expect("start");
    let first = sw.script();
    let hits = Arc::clone(first.vm.map("hits").expect("hits"));
    let mut switch_us = Vec::with_capacity(reloads);
    let mut load_us = Vec::with_capacity(reloads);
    for i in 0..reloads {
        if i == reloads / 2 {
            let before = sw.stats().ports[0].tx;
            let e = sw.reload(&other_hook).expect_err("an XDP build is refused");
            assert!(e.to_string().contains("hook"), "{e}");
            // Still forwarding on the running version.
            while sw.stats().ports[0].tx <= before {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let c = if i.is_multiple_of(2) { &b } else { &a };
        let r = sw.reload(c).expect("reload");
        assert_eq!(r.version, i as u64 + 2);
        assert_eq!(r.previous, i as u64 + 1);
        switch_us.push(r.switch.as_secs_f64() * 1e6);
        load_us.push(r.load.as_secs_f64() * 1e6);
    }
    traffic.stop();
    // Every frame given is processed and sent.
    let given = loop {
        let n = traffic.given();
        let s = sw.stats();
        if s.ports[0].tx == n {
            break n;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // An idle switch reloads (parked workers do not hold it up).
    let idle = sw.reload(if reloads.is_multiple_of(2) { &b } else { &a });
    let idle = idle.expect("idle reload");
    let last = sw.script();
    assert!(
        last.vm.map("hits").expect("hits").same_store(&hits),
        "the counter map is kept by name"
    );
    sw.stop();
    let (stats, _) = sw.finish().expect("finish");
    assert_eq!(stats.reloads, reloads as u64 + 1);
    assert_eq!(stats.reload_failures, 1);
    assert_eq!(stats.version, reloads as u64 + 2);
    assert!(given > reloads as u64, "traffic flowed: {given} frames");
    // Each frame out exactly once.
    let out = traffic.out();
    assert_each_once(&out, given);
    // Counted in exactly one version; marks match the versions' counts
    // (odd versions are A, even ones B).
    assert_eq!(stats.versions.len(), reloads + 2);
    let total: u64 = stats.versions.iter().map(|v| v.frames).sum();
    assert_eq!(total, given);
    let odd: u64 = stats
        .versions
        .iter()
        .filter(|v| v.version % 2 == 1)
        .map(|v| v.frames)
        .sum();
    let marked_a = out.iter().filter(|(_, m)| *m == b'A').count() as u64;
    let marked_b = out.iter().filter(|(_, m)| *m == b'B').count() as u64;
    assert_eq!(marked_a + marked_b, given);
    assert_eq!(marked_a, odd, "frames marked A = frames of A's versions");
    let on_many = stats.versions.iter().filter(|v| v.frames > 0).count();
    // The counter map kept counting across every version.
    let per_cpu = hits.lookup(&0u32.to_le_bytes()).expect("lookup");
    let counted: u64 = per_cpu
        .unwrap_or_default()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .sum();
    assert_eq!(counted, given);
    switch_us.sort_by(f64::total_cmp);
    load_us.sort_by(f64::total_cmp);
    println!(
        "{workers} workers, {queues} rx queues: {reloads} reloads, {given} frames, \
         {on_many} versions ran frames; switch (publish -> all workers) µs: \
         p50 {:.1}, p99 {:.1}, max {:.1}; load µs: p50 {:.0}, p99 {:.0}; \
         idle reload {:.1} µs ({} parked)",
        percentile(&switch_us, 0.5),
        percentile(&switch_us, 0.99),
        percentile(&switch_us, 1.0),
        percentile(&load_us, 0.5),
        percentile(&load_us, 0.99),
        idle.switch.as_secs_f64() * 1e6,
        idle.parked,
    );
}

#[test]
fn a_thousand_reloads_one_worker_lose_no_frame() {
    reloads_under_traffic(1, 1, 1000);
}

#[test]
fn a_thousand_reloads_two_workers_dispatching_lose_no_frame() {
    reloads_under_traffic(2, 1, 1000);
}

#[test]
fn a_thousand_reloads_two_workers_two_queues_lose_no_frame() {
    reloads_under_traffic(2, 2, 1000);
}
