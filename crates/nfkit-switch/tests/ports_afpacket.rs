//! AF_PACKET ports on a veth, in namespaces of their own: frames sent
//! by the peer arrive once across the workers' fanout RX queues, byte
//! for byte; frames sent through each worker's TX queue reach the peer.

mod ports_common;

use nfkit_switch::port::open::open_live;
use nfkit_switch::port::PortSpec;
use ports_common::*;
use std::time::Duration;

#[test]
fn afpacket_two_workers_receive_each_frame_once_and_transmit() {
    if !root() {
        return;
    }
    let pair = Pair::new(1);
    let frames: Vec<Vec<u8>> = (0..300).map(|i| frame(i, 20 + (i as usize % 50))).collect();
    let spec = PortSpec::AfPacket {
        dev: pair.a.clone(),
    };
    in_ns(&pair.ns_a, || {
        let mut port = open_live(&spec, 2).expect("open");
        assert_eq!(port.rx.len(), 2);
        assert_eq!(port.tx.len(), 2);
        assert!(port.ifindex > 0);

        // RX: every frame once over both fanout members.
        send_from(&pair.ns_b, &pair.b, &frames);
        let seen = collect(&mut port.rx, frames.len(), Duration::from_secs(3));
        assert_each_once(&seen, &frames);
        let per_queue = |q: usize| seen.values().filter(|c| c[0].0 == q).count();
        eprintln!("fanout: {} + {}", per_queue(0), per_queue(1));

        // TX: each worker's queue reaches the peer.
        let mut peer = open_in(
            &pair.ns_b,
            &PortSpec::AfPacket {
                dev: pair.b.clone(),
            },
            1,
        )
        .expect("peer");
        for w in 0..2 {
            let batch: Vec<Vec<u8>> = (0..100).map(|i| frame(1000 * (w + 1) + i, 30)).collect();
            send_all(port.tx[w as usize].as_mut(), &batch);
            let got = collect(&mut peer.rx, batch.len(), Duration::from_secs(3));
            let want: Vec<(u32, &Vec<u8>)> = batch
                .iter()
                .enumerate()
                .map(|(i, f)| (1000 * (w + 1) + i as u32, f))
                .collect();
            assert_eq!(got.len(), want.len(), "worker {w}: frames at the peer");
            for (s, f) in want {
                assert_eq!(
                    got.get(&s).map(|c| &c[0].1),
                    Some(f),
                    "worker {w} frame {s}"
                );
            }
        }
        // Our own transmissions are not received back.
        let echo = collect(&mut port.rx, 1, Duration::from_millis(200));
        assert!(
            echo.is_empty(),
            "outgoing frames were received: {:?}",
            echo.keys()
        );
        let stats = port.shut().expect("close");
        assert_eq!(stats.tx_dropped, 0);
        peer.shut().expect("close peer");
    });
}

#[test]
fn afpacket_missing_device_is_a_named_error() {
    if !root() {
        return;
    }
    let ns = nfkit_kernel::testbed::Netns::new("pm").expect("netns");
    let spec = PortSpec::AfPacket {
        dev: "nfkitnope0".into(),
    };
    let err = in_ns(&ns, || open_live(&spec, 1).err().expect("must fail")).to_string();
    assert!(err.contains("nfkitnope0:afpacket"), "{err}");
}
