//! The engine on a TAP (host) port with real traffic (as root, in a
//! namespace of its own): frames a chain PASSes reach the host stack (a
//! UDP socket bound to the TAP's address receives every datagram), and
//! what the host stack sends out of the TAP (datagrams routed through
//! it) enters the switch on the TAP's port and goes where the chain
//! says (a pcap port's output). Two workers; the TAP is gone at the end.

mod common;
mod ports_common;

use common::{compile_switch, scratch, udp4};
use nfkit_kernel::testbed::Netns;
use nfkit_pcap::Packet;
use nfkit_switch::port::{any, PortSpec};
use nfkit_switch::{Switch, SwitchConfig};
use ports_common::{in_ns, root, unique};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// Port 1 (a pcap) to the host; the host port's frames to port 1.
const SCRIPT: &str = r#"
from nf.classify import every_packet

def main() -> u64:
    if Packet.in_port == 1:
        return PASS
    return REDIRECT(1)

every_packet(main)
attach("sw0", "switch")
"#;

const N: usize = 50;

fn mac_of(ns: &Netns, dev: &str) -> [u8; 6] {
    let out = ns.ip(&["-j", "link", "show", "dev", dev]).expect("ip link");
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
    let text = v[0]["address"].as_str().expect("address").to_string();
    let mut mac = [0u8; 6];
    for (m, part) in mac.iter_mut().zip(text.split(':')) {
        *m = u8::from_str_radix(part, 16).expect("hex");
    }
    mac
}

#[test]
fn pass_reaches_the_host_stack_and_the_host_reaches_the_ports() {
    if !root() {
        return;
    }
    let ns = Netns::new("swtap").expect("netns");
    let tap = unique("h");
    let dir = scratch("host-port");
    let c = compile_switch("host.py", SCRIPT);
    let (seen_by_host, out, stats) = in_ns(&ns, || {
        // The TAP first (its MAC is the frames' destination), then its
        // address and a neighbour behind it.
        let workers = 2;
        let tap_port =
            any::open(&PortSpec::Tap { name: tap.clone() }, workers).expect("open TAP port");
        ns.ip(&["addr", "add", "198.18.210.1/24", "dev", &tap])
            .expect("address");
        ns.ip(&[
            "neigh",
            "replace",
            "198.18.210.2",
            "lladdr",
            "02:00:00:00:00:09",
            "dev",
            &tap,
        ])
        .expect("neighbour");
        let host = UdpSocket::bind("198.18.210.1:7000").expect("host socket");
        host.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let tap_mac = mac_of(&ns, &tap);

        // Port 1 replays datagrams to the host's socket.
        let frames: Vec<Packet> = (0..N)
            .map(|i| {
                let mut f = udp4(
                    [198, 18, 210, 2],
                    [198, 18, 210, 1],
                    5000,
                    7000,
                    0,
                    64,
                    format!("to-host {i}").as_bytes(),
                );
                f[..6].copy_from_slice(&tap_mac);
                f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
                Packet::new(i as u64, f)
            })
            .collect();
        let input = dir.join("in.pcap");
        let output = dir.join("out.pcap");
        nfkit_pcap::write_file(&input, &frames).expect("input");
        let spec: PortSpec = format!("p1:pcap={},out={}", input.display(), output.display())
            .parse()
            .expect("spec");
        let pcap_port = any::open(&spec, workers).expect("open pcap port");
        let cfg = SwitchConfig {
            workers,
            pin: false,
            ..SwitchConfig::default()
        };
        let sw = Switch::start(&c, vec![pcap_port, tap_port], &cfg).expect("start");

        // PASS: every datagram reaches the host's socket.
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        let t0 = Instant::now();
        while seen.len() < N && t0.elapsed() < Duration::from_secs(5) {
            if let Ok((n, _)) = host.recv_from(&mut buf) {
                seen.push(String::from_utf8_lossy(&buf[..n]).to_string());
            }
        }

        // Host -> switch: datagrams routed out of the TAP.
        for i in 0..N {
            host.send_to(format!("from-host {i}").as_bytes(), "198.18.210.2:9")
                .expect("send");
        }
        let t0 = Instant::now();
        while sw.stats().ports[1].rx < N as u64 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50));
        sw.stop();
        let (stats, _) = sw.finish().expect("finish");
        let out = nfkit_pcap::read_file(&output).expect("output");
        (seen, out, stats)
    });

    let mut want: Vec<String> = (0..N).map(|i| format!("to-host {i}")).collect();
    let mut got = seen_by_host;
    got.sort();
    want.sort();
    assert_eq!(got, want, "every PASSed datagram reached the host stack");

    // Every host datagram left through port 1, once (the host may send
    // other frames too: IPv6 router solicitations and the like).
    let mut from_host: Vec<String> = out
        .iter()
        .map(|p| &p.data)
        .filter(|f| f.len() > 42 && f[12..14] == [0x08, 0x00] && f[23] == 17)
        .filter_map(|f| {
            let s = String::from_utf8_lossy(&f[42..]).to_string();
            s.starts_with("from-host").then_some(s)
        })
        .collect();
    from_host.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("from-host {i}")).collect();
    want.sort();
    assert_eq!(from_host, want, "every host datagram out of port 1");
    for f in out.iter().filter(|p| p.data.len() > 42 && p.data[23] == 17) {
        assert_eq!(&f.data[..6], &[2, 0, 0, 0, 0, 9], "to the neighbour's MAC");
    }
    assert_eq!(stats.ports[0].rx, N as u64);
    assert_eq!(stats.ports[1].tx, N as u64, "PASS out of the TAP");
    assert!(stats.ports[1].rx >= N as u64);
    assert_eq!(stats.no_host_port, 0);
    let gone = ns.ip(&["-o", "link", "show", "dev", &tap]);
    assert!(
        gone.is_err() || gone.is_ok_and(|s| s.trim().is_empty()),
        "TAP removed"
    );
    std::fs::remove_dir_all(&dir).ok();
}
