//! AF_XDP ports on veths (copy mode), in namespaces of their own: the
//! switch's XDP program is there while the port is open and gone after
//! close and after a drop without close; frames from the peer arrive
//! byte for byte over 1 and 4 queues; each worker's TX queue (XSK or,
//! past the queue count, AF_PACKET) reaches the peer; a device that
//! already has an XDP program is refused with its name.

mod ports_common;

use nfkit_switch::port::afxdp::open_mode;
use nfkit_switch::port::open::open_live;
use nfkit_switch::port::PortSpec;
use ports_common::*;
use std::time::Duration;

fn has_xdp(pair: &Pair) -> bool {
    pair.link_a().contains("prog/xdp")
}

/// Every worker's TX queue reaches the peer (received there by an
/// AF_PACKET port), byte for byte.
fn check_tx(pair: &Pair, port: &mut nfkit_switch::port::OpenPort) {
    let mut peer = open_in(
        &pair.ns_b,
        &PortSpec::AfPacket {
            dev: pair.b.clone(),
        },
        1,
    )
    .expect("peer");
    for w in 0..port.tx.len() {
        let base = 10_000 * (w as u32 + 1);
        let batch: Vec<Vec<u8>> = (0..150).map(|i| frame(base + i, 40)).collect();
        send_all(port.tx[w].as_mut(), &batch);
        let got = collect(&mut peer.rx, batch.len(), Duration::from_secs(3));
        assert_eq!(got.len(), batch.len(), "worker {w}: frames at the peer");
        for (i, f) in batch.iter().enumerate() {
            let copies = got
                .get(&(base + i as u32))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            assert_eq!(copies.len(), 1, "worker {w} frame {i}");
            assert_eq!(&copies[0].1, f, "worker {w} frame {i} bytes");
        }
    }
}

#[test]
fn afxdp_one_queue_two_workers() {
    if !root() {
        return;
    }
    let pair = Pair::new(1);
    let spec = PortSpec::AfXdp {
        dev: pair.a.clone(),
    };
    in_ns(&pair.ns_a, || {
        assert!(!has_xdp(&pair));
        let (mut port, mode) = open_mode(&spec, &pair.a, 2).expect("open");
        eprintln!("mode: {mode:?}");
        assert_eq!(mode.queues, 1);
        assert!(!mode.zero_copy, "veth offers no zero-copy");
        assert_eq!(port.rx.len(), 1);
        assert_eq!(port.tx.len(), 2);
        assert!(has_xdp(&pair), "program attached: {}", pair.link_a());

        let frames: Vec<Vec<u8>> = (0..500).map(|i| frame(i, i as usize % 200)).collect();
        send_from(&pair.ns_b, &pair.b, &frames);
        let seen = collect(&mut port.rx, frames.len(), Duration::from_secs(3));
        assert_each_once(&seen, &frames);

        check_tx(&pair, &mut port);
        let stats = port.shut().expect("close");
        assert_eq!(stats.tx_dropped, 0);
        assert!(
            !has_xdp(&pair),
            "program gone after close: {}",
            pair.link_a()
        );
        // Closing twice does nothing more.
        port.shut().expect("close again");
    });
}

#[test]
fn afxdp_four_queues() {
    if !root() {
        return;
    }
    let pair = Pair::new(4);
    let spec = PortSpec::AfXdp {
        dev: pair.a.clone(),
    };
    in_ns(&pair.ns_a, || {
        let (mut port, mode) = open_mode(&spec, &pair.a, 4).expect("open");
        eprintln!("mode: {mode:?}");
        assert_eq!(mode.queues, 4);
        assert_eq!(port.rx.len(), 4);
        assert_eq!(port.tx.len(), 4);

        let frames: Vec<Vec<u8>> = (0..800).map(|i| frame(i, 16)).collect();
        send_from(&pair.ns_b, &pair.b, &frames);
        let seen = collect(&mut port.rx, frames.len(), Duration::from_secs(3));
        assert_each_once(&seen, &frames);
        let per_queue: Vec<usize> = (0..4)
            .map(|q| seen.values().filter(|c| c[0].0 == q).count())
            .collect();
        eprintln!("frames per RX queue: {per_queue:?}");

        check_tx(&pair, &mut port);
        drop(port);
        assert!(
            !has_xdp(&pair),
            "program gone after drop: {}",
            pair.link_a()
        );
    });
}

#[test]
fn afxdp_more_queues_than_workers_and_drop_without_close() {
    if !root() {
        return;
    }
    let pair = Pair::new(4);
    let spec = PortSpec::AfXdp {
        dev: pair.a.clone(),
    };
    in_ns(&pair.ns_a, || {
        let mut port = open_live(&spec, 1).expect("open");
        assert_eq!(port.rx.len(), 1, "one worker serves all four queues");
        let frames: Vec<Vec<u8>> = (0..400).map(|i| frame(i, 8)).collect();
        send_from(&pair.ns_b, &pair.b, &frames);
        let seen = collect(&mut port.rx, frames.len(), Duration::from_secs(3));
        assert_each_once(&seen, &frames);
        assert!(has_xdp(&pair));
        drop(port);
        assert!(
            !has_xdp(&pair),
            "program gone after drop: {}",
            pair.link_a()
        );
    });
}

#[test]
fn afxdp_refuses_a_device_with_an_xdp_program() {
    if !root() {
        return;
    }
    let pair = Pair::new(1);
    let spec = PortSpec::AfXdp {
        dev: pair.a.clone(),
    };
    in_ns(&pair.ns_a, || {
        let first = open_live(&spec, 1).expect("open");
        let err = open_live(&spec, 1)
            .err()
            .expect("second open must fail")
            .to_string();
        assert!(err.contains("nfkit_xsk_redir"), "{err}");
        assert!(err.contains(&pair.a), "{err}");
        // The refused open left the first port's program alone.
        assert!(has_xdp(&pair));
        drop(first);
        assert!(!has_xdp(&pair));
        // And the device can be opened again.
        let again = open_live(&spec, 1).expect("reopen");
        drop(again);
    });
}
