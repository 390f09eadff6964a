//! examples/router.py's packets, what the VM does with them per output
//! port, and a namespace testbed whose devices are the router's ports:
//! shared by `pipeline_deploy.rs` (directly) and `daemon_pipeline.rs`
//! (through nfkitd).

use super::examples;
use nfkit_kernel::testbed::Netns;
use nfkit_vm::Engine;

/// The router's packets, (timestamp, bytes), from examples/router.pcap.
pub fn router_packets() -> Vec<(u64, Vec<u8>)> {
    nfkit_pcap::read_file(examples().join("router.pcap"))
        .expect("read examples/router.pcap")
        .into_iter()
        .map(|p| (p.ts_ns, p.data))
        .collect()
}

/// Per output port (2 and 3), the frames a run sent there, in order.
pub type PerPort = [Vec<Vec<u8>>; 2];

/// The VM: the frames of each REDIRECT verdict, by port.
pub fn vm_per_port(packets: &[(u64, Vec<u8>)]) -> (PerPort, u64) {
    let src = std::fs::read_to_string(examples().join("router.py")).expect("router.py");
    let opts = nfkit_lang::Options {
        hook: Some(nfkit_nf::Hook::Tc),
        ..nfkit_lang::Options::default()
    };
    let c =
        nfkit_lang::compile("examples/router.py", &src, &opts).unwrap_or_else(|e| panic!("{e}"));
    let r = nfkit_control::runner::run_capture_on(&c, packets, false, Engine::Interp).expect("run");
    let mut out: PerPort = [Vec::new(), Vec::new()];
    for (line, (ts, _)) in r.lines.iter().zip(packets) {
        if line.verdict != "REDIRECT" {
            continue;
        }
        let port = line.redirect.expect("a port") as usize;
        let bytes = r
            .out
            .iter()
            .find(|(t, _)| t == ts)
            .map(|(_, b)| b.clone())
            .expect("the redirected frame");
        out[port - 2].push(bytes);
    }
    let routed = (out[0].len() + out[1].len()) as u64;
    (out, routed)
}

/// The router's namespace: output devices with ifindexes 2 and 3 (the
/// ports of examples/router.py) and the input device, each a veth to a
/// second namespace that sends and captures.
pub struct RouterBed {
    // Namespaces go last (fields drop in order; their veths go with them).
    pub router: Netns,
    pub host: Netns,
}

pub const IN: &str = "ppin";
pub const OUT: [&str; 2] = ["ppo2", "ppo3"];
pub const PEER_IN: &str = "pphin";
pub const PEER: [&str; 2] = ["pph2", "pph3"];

impl RouterBed {
    pub fn new() -> RouterBed {
        let router = Netns::new("pipe-rt").expect("netns");
        let host = Netns::new("pipe-rh").expect("netns");
        for ns in [&router, &host] {
            for k in ["all", "default"] {
                ns.exec(&[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
                ])
                .expect("sysctl");
            }
        }
        let pairs = [
            (OUT[0], "2", PEER[0]),
            (OUT[1], "3", PEER[1]),
            (IN, "4", PEER_IN),
        ];
        for (dev, index, peer) in pairs {
            router
                .ip(&[
                    "link",
                    "add",
                    dev,
                    "index",
                    index,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    peer,
                    "netns",
                    host.name(),
                ])
                .expect("veth");
            router.ip(&["link", "set", dev, "up"]).expect("up");
            host.ip(&["link", "set", peer, "up"]).expect("up");
        }
        assert_eq!(router.ifindex(OUT[0]).expect("ifindex"), 2);
        assert_eq!(router.ifindex(OUT[1]).expect("ifindex"), 3);
        RouterBed { router, host }
    }
}

impl RouterBed {
    /// Sends `packets` into the router's input device and returns the
    /// IPv4 frames that left by each output port.
    pub fn send_and_capture(&self, packets: &[(u64, Vec<u8>)]) -> PerPort {
        use nfkit_traffic::recv::Capture;
        use std::time::Duration;
        let caps: Vec<Capture> = PEER
            .iter()
            .map(|p| Capture::start(p, Some(self.host.name()), 64).expect("capture"))
            .collect();
        // One sender run for all frames: the rate-limited source's 12
        // frames must reach the token bucket (5/s, burst 5) within its
        // 200 ms refill, as in the capture (1 ms apart), however loaded
        // the machine; a send per frame from this thread was not.
        super::send_frames_in_order(
            &self.host,
            PEER_IN,
            packets.iter().map(|(_, f)| f.clone()).collect(),
        );
        std::thread::sleep(Duration::from_millis(300));
        let mut got = caps.into_iter().map(|c| {
            c.finish()
                .expect("capture")
                .into_iter()
                .filter(|f| f.get(12..14) == Some(&[0x08, 0x00]))
                .collect::<Vec<_>>()
        });
        let a = got.next().unwrap_or_default();
        let b = got.next().unwrap_or_default();
        [a, b]
    }
}

/// The devices of the post deployments in `nfkit status --json`'s
/// answer `st`, sorted; each must be attached at TC egress.
pub fn post_devs(st: &serde_json::Value) -> Vec<String> {
    let mut devs: Vec<String> = st["deployments"]
        .as_array()
        .expect("status list")
        .iter()
        .filter(|d| d["post_of"].is_string())
        .map(|d| {
            assert_eq!(d["hook"], "tc-egress", "{d}");
            assert_eq!(d["attached"], true, "{d}");
            d["dev"].as_str().unwrap_or("").to_string()
        })
        .collect();
    devs.sort();
    devs
}
