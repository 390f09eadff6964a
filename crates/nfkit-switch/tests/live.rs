//! The switch on live ports (as root; skipped otherwise): two veth pairs
//! in namespaces, the switch's AF_PACKET or AF_XDP ports on one end of
//! each; a
//! chain that sends each frame out of the other port
//! (`REDIRECT(3 - Packet.in_port)`) forwards every test frame sent into
//! port 1, byte for byte, to the far end of port 2, with one and two
//! workers; stop() ends it and the counters say so; every frame sent
//! was timed from receive ring to transmit ring (`Switch::latency`).

mod ports_common;
use nfkit_abi::verdict::Action;
use nfkit_abi::Hook;
use nfkit_switch::{Switch, SwitchConfig};
use ports_common::*;
use std::time::Duration;

const CROSS: &str = "from nf.classify import every_packet\n\
def main() -> u64:\n    return REDIRECT(3 - Packet.in_port)\n\
every_packet(main)\n";

#[test]
fn afpacket_ports_forward_through_the_chain() {
    forward_through_the_chain("afpacket");
}

#[test]
fn afxdp_ports_forward_through_the_chain() {
    forward_through_the_chain("afxdp");
}

fn forward_through_the_chain(kind: &str) {
    if !root() {
        return;
    }
    let opts = nfkit_lang::Options {
        hook: Some(Hook::Switch),
        ..nfkit_lang::Options::default()
    };
    let c = nfkit_lang::compile("cross.py", CROSS, &opts).expect("compile");
    for workers in [1, 2] {
        let p1 = Pair::new(1);
        let p2 = Pair::new(1);
        let spec1 = format!("{}:{kind}", p1.b).parse().expect("spec");
        let spec2 = format!("{}:{kind}", p2.b).parse().expect("spec");
        let port1 = open_in(&p1.ns_b, &spec1, workers).expect("port 1");
        let port2 = open_in(&p2.ns_b, &spec2, workers).expect("port 2");
        let cap_spec = format!("{}:afpacket", p2.a).parse().expect("spec");
        let mut cap = open_in(&p2.ns_a, &cap_spec, 1).expect("capture");
        let cfg = SwitchConfig {
            workers,
            pin: false,
            ..SwitchConfig::default()
        };
        let sw = Switch::start(&c, vec![port1, port2], &cfg).expect("start");
        assert!(!sw.replay());
        let frames: Vec<Vec<u8>> = (0..200).map(|s| frame(s, 30)).collect();
        send_from(&p1.ns_a, &p1.a, &frames);
        let seen = collect(&mut cap.rx, frames.len(), Duration::from_secs(3));
        assert_each_once(&seen, &frames);
        sw.stop();
        // Read the histogram once every worker has ended, so no frame is
        // sent between it and the counters.
        let t0 = std::time::Instant::now();
        while !sw.is_done() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(sw.is_done(), "workers still running 10 s after stop");
        // Every frame sent was timed from its receive ring to its
        // transmit ring: a few µs to ms, on a shared machine.
        let lat = sw.latency();
        let (stats, _) = sw.finish().expect("finish");
        let sent: u64 = stats.ports.iter().map(|p| p.tx).sum();
        assert_eq!(lat.frames, sent, "{lat:?}");
        assert!(lat.p50_ns > 0 && lat.p50_ns <= lat.p99_ns && lat.p99_ns <= lat.max_ns);
        assert!(lat.p50_ns < 1_000_000_000, "{lat:?}");
        assert!(stats.ports[0].rx >= 200, "{:?}", stats.ports[0]);
        assert!(stats.ports[1].tx >= 200, "{:?}", stats.ports[1]);
        assert!(stats.action(Action::Redirect) >= 200);
        assert_eq!(stats.faults, 0);
    }
}
