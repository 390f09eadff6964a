//! Micro-numbers, run by hand (ignored): frames per second one RX queue
//! delivers and one TX queue sends, 64-byte frames, per port kind, on a
//! veth (AF_XDP, AF_PACKET) or the TAP itself. The other side is an
//! AF_PACKET port (sendmmsg sender / TPACKET_V3 receiver) on its own
//! thread. `cargo test --release -p nfkit-switch --test ports_rate --
//! --ignored --nocapture --test-threads 1`

mod ports_common;

use nfkit_kernel::testbed::Netns;
use nfkit_switch::port::open::open_live;
use nfkit_switch::port::{Batch, OpenPort, OutFrame, PortSpec, RxQueue, TxQueue, BATCH};
use ports_common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const RUN: Duration = Duration::from_secs(2);

/// Sends 64-byte frames through `tx` until `stop`; frames taken.
fn blast(tx: &mut dyn TxQueue, stop: &AtomicBool) -> u64 {
    let f = frame(1, 10);
    assert_eq!(f.len(), 64);
    let out = [OutFrame {
        data: &f,
        arrival_ns: 0,
    }; BATCH];
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        sent += tx.send(&out).expect("send") as u64;
    }
    let _ = tx.flush();
    sent
}

/// Counts frames from `rx` for [`RUN`].
fn count(rx: &mut dyn RxQueue) -> u64 {
    let mut batch = Batch::new();
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < RUN {
        n += rx
            .recv(&mut batch, Duration::from_millis(10))
            .expect("recv") as u64;
    }
    n
}

/// RX rate of `port` fed by `feeder`'s TX, then TX rate of `port`
/// counted by `feeder`'s RX.
fn measure(kind: &str, port: &mut OpenPort, feeder: &mut OpenPort) {
    let stop = AtomicBool::new(false);
    let (offered, got) = std::thread::scope(|s| {
        let ftx = feeder.tx[0].as_mut();
        let h = s.spawn(|| blast(ftx, &stop));
        let got = count(port.rx[0].as_mut());
        stop.store(true, Ordering::Relaxed);
        (h.join().expect("sender"), got)
    });
    let secs = RUN.as_secs_f64();
    println!(
        "{kind}: RX {:.0} frames/s (offered {:.0}/s)",
        got as f64 / secs,
        offered as f64 / secs
    );
    // Let the feeder's queue drain before the other direction.
    std::thread::sleep(Duration::from_millis(200));
    let stop = AtomicBool::new(false);
    let (taken, seen) = std::thread::scope(|s| {
        let ptx = port.tx[0].as_mut();
        let h = s.spawn(|| blast(ptx, &stop));
        let seen = count(feeder.rx[0].as_mut());
        stop.store(true, Ordering::Relaxed);
        (h.join().expect("sender"), seen)
    });
    println!(
        "{kind}: TX {:.0} frames/s taken, {:.0}/s seen by the receiver",
        taken as f64 / secs,
        seen as f64 / secs
    );
}

fn veth_kind(spec_of: fn(String) -> PortSpec, kind: &str) {
    let pair = Pair::new(1);
    in_ns(&pair.ns_a, || {
        let mut port = open_live(&spec_of(pair.a.clone()), 1).expect("open");
        for feeder_spec in [
            PortSpec::AfPacket {
                dev: pair.b.clone(),
            },
            PortSpec::AfXdp {
                dev: pair.b.clone(),
            },
        ] {
            let mut feeder = open_in(&pair.ns_b, &feeder_spec, 1).expect("peer");
            measure(&format!("{kind} <-> {feeder_spec}"), &mut port, &mut feeder);
        }
    });
}

#[test]
#[ignore]
fn rate_afxdp() {
    if !root() {
        return;
    }
    veth_kind(|dev| PortSpec::AfXdp { dev }, "afxdp (copy, veth)");
}

#[test]
#[ignore]
fn rate_afpacket() {
    if !root() {
        return;
    }
    veth_kind(|dev| PortSpec::AfPacket { dev }, "afpacket (veth)");
}

#[test]
#[ignore]
fn rate_tap() {
    if !root() {
        return;
    }
    let ns = Netns::new("pr").expect("netns");
    let name = unique("r");
    in_ns(&ns, || {
        let mut port = open_live(&PortSpec::Tap { name: name.clone() }, 1).expect("open");
        let mut feeder = open_live(&PortSpec::AfPacket { dev: name.clone() }, 1).expect("feeder");
        measure("tap", &mut port, &mut feeder);
    });
}
