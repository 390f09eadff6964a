//! TAP (host) ports, in a namespace of their own: the device exists and
//! is up while the port is open; what the host sends out of it (a raw
//! packet socket, a UDP datagram routed through it) arrives at the RX
//! queues; what each worker's TX queue sends is seen on the device by a
//! packet socket; the device is gone after close and after drop.

mod ports_common;

use nfkit_kernel::testbed::Netns;
use nfkit_switch::port::open::open_live;
use nfkit_switch::port::{Batch, PortSpec};
use ports_common::*;
use std::time::Duration;

fn link(ns: &Netns, dev: &str) -> Option<String> {
    ns.ip(&["-o", "link", "show", "dev", dev]).ok()
}

#[test]
fn tap_port_carries_host_frames_both_ways() {
    if !root() {
        return;
    }
    let ns = Netns::new("pt").expect("netns");
    let name = unique("t");
    let spec = PortSpec::Tap { name: name.clone() };
    in_ns(&ns, || {
        assert!(link(&ns, &name).is_none());
        let mut port = open_live(&spec, 2).expect("open");
        assert_eq!(port.rx.len(), 2);
        assert_eq!(port.tx.len(), 2);
        let shown = link(&ns, &name).expect("device exists while open");
        assert!(shown.contains(",UP"), "{shown}");
        // Opening the same name again is refused (it is not ours).
        let err = open_live(&spec, 1).err().expect("second open").to_string();
        assert!(err.contains("already exists"), "{err}");

        // Host -> switch, through a raw packet socket on the TAP.
        let frames: Vec<Vec<u8>> = (0..200).map(|i| frame(i, 10)).collect();
        send_from(&ns, &name, &frames);
        let seen = collect(&mut port.rx, frames.len(), Duration::from_secs(3));
        assert_each_once(&seen, &frames);

        // Host -> switch, a UDP datagram routed via the TAP.
        ns.ip(&["addr", "add", "198.18.200.1/24", "dev", &name])
            .expect("address");
        ns.ip(&[
            "neigh",
            "add",
            "198.18.200.2",
            "lladdr",
            "02:00:00:00:00:09",
            "dev",
            &name,
        ])
        .expect("neighbour");
        let sock = std::net::UdpSocket::bind("198.18.200.1:0").expect("udp socket");
        sock.send_to(b"NFKITPRT\0\0\x01\x00hello", "198.18.200.2:9")
            .expect("udp send");
        let seen = collect(&mut port.rx, 1, Duration::from_secs(3));
        let udp = &seen.get(&256).expect("datagram at the switch")[0].1;
        assert_eq!(&udp[..6], &[2, 0, 0, 0, 0, 9], "to the neighbour's MAC");
        assert_eq!(&udp[12..14], &[0x08, 0x00], "IPv4");
        assert_eq!(udp[23], 17, "UDP");
        assert!(udp.ends_with(b"hello"));

        // Switch -> host: each worker's queue, seen by a packet socket.
        let mut watch = open_live(&PortSpec::AfPacket { dev: name.clone() }, 1).expect("watch");
        for w in 0..2u32 {
            let base = 1000 * (w + 1);
            let batch: Vec<Vec<u8>> = (0..100).map(|i| frame(base + i, 30)).collect();
            send_all(port.tx[w as usize].as_mut(), &batch);
            let got = collect(&mut watch.rx, batch.len(), Duration::from_secs(3));
            assert_eq!(got.len(), batch.len(), "worker {w}: frames on the TAP");
            for (i, f) in batch.iter().enumerate() {
                let c = got.get(&(base + i as u32)).expect("frame");
                assert_eq!(&c[0].1, f, "worker {w} frame {i}");
            }
        }
        drop(watch);

        port.shut().expect("close");
        assert!(link(&ns, &name).is_none(), "device gone after close");
        // The queues now report errors or nothing, never a panic.
        let mut batch = Batch::new();
        let _ = port.rx[0].recv(&mut batch, Duration::from_millis(10));
    });
}

#[test]
fn tap_device_gone_after_drop() {
    if !root() {
        return;
    }
    let ns = Netns::new("pd").expect("netns");
    let name = unique("d");
    let spec = PortSpec::Tap { name: name.clone() };
    in_ns(&ns, || {
        let port = open_live(&spec, 3).expect("open");
        assert!(link(&ns, &name).is_some());
        drop(port);
        assert!(link(&ns, &name).is_none(), "device gone after drop");
    });
}
