//! Pipeline positions in the switch: a script with tables, `pre` and
//! `post` runs on pcap ports; `post` runs on every frame sent out of a
//! port, before transmission, with the ingress program's maps (one
//! counter map shared by both), and a DROP there keeps the frame off its
//! port.

mod common;
use common::*;
use nfkit_switch::port::{any, PortSpec};
use nfkit_switch::{Switch, SwitchConfig};
use std::time::Duration;

const SCRIPT: &str = r#"
seen = ArrayMap(u64, 4)     # 0: pre ran, 1: post ran, 2: post dropped

def pre() -> u64:
    seen[0] += 1
    return 0

def post() -> u64:
    seen[1] += 1
    if Packet.read_u8(14 + 8) == 63:     # frames routed with TTL 64 -> 63 ...
        if Packet.read_u8(14 + 19) == 9:  # ... to 198.18.2.9 are dropped at egress
            seen[2] += 1
            return DROP
    return PASS

def route(port: u64) -> u64:
    Packet.write_u8(14 + 8, Packet.read_u8(14 + 8) - 1)
    return port

ROUTES = Table(keys={"ip.dst": "lpm"}, actions=[route, DROP], size=16, default=DROP,
               entries=[("198.18.1.0/24", route, 2), ("198.18.2.0/24", route, 3)])

pipeline(pre=pre, tables=[ROUTES], post=post)
attach("sw0", "switch")
"#;

#[test]
fn post_runs_per_output_port_with_the_ingress_maps() {
    let c = compile_switch("pipeline.py", SCRIPT);
    let dsts: [[u8; 4]; 5] = [
        [198, 18, 1, 1],
        [198, 18, 2, 1],
        [198, 18, 2, 9],
        [198, 18, 3, 1],
        [198, 18, 1, 7],
    ];
    let packets: Vec<nfkit_pcap::Packet> = (0..20u64)
        .map(|i| {
            let d = dsts[i as usize % dsts.len()];
            nfkit_pcap::Packet::new(
                1_000_000_000 + i * 1000,
                udp4([198, 18, 0, 1], d, 1000, 2000, 0, 64, b"p"),
            )
        })
        .collect();
    let dir = scratch("pipeline-post");
    let input = dir.join("in.pcap");
    nfkit_pcap::write_file(&input, &packets).expect("write input");
    let specs: Vec<PortSpec> = (0..PORTS)
        .map(|i| {
            let out = dir.join(format!("out{}.pcap", i + 1));
            let text = if i == 0 {
                format!("p1:pcap={},out={}", input.display(), out.display())
            } else {
                format!("p{}:pcap,out={}", i + 1, out.display())
            };
            text.parse().expect("spec")
        })
        .collect();
    let ports = any::open_all(&specs, 1).expect("open ports");
    let cfg = SwitchConfig {
        workers: 1,
        pin: false,
        host_port: Some(HOST),
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&c, ports, &cfg).expect("start");
    while !sw.is_done() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ver = sw.script();
    let post = ver.post.as_ref().expect("the script has a post program");
    let seen = ver.vm.map("seen").expect("seen");
    let slot = |k: u32| {
        let v = seen
            .lookup(&k.to_le_bytes())
            .expect("lookup")
            .expect("slot");
        u64::from_le_bytes(v[..8].try_into().expect("8 bytes"))
    };
    // 20 frames in; 4 unrouted (198.18.3.1); 16 routed, 4 of them to
    // 198.18.2.9 dropped by post.
    assert_eq!(slot(0), 20, "pre ran on every frame");
    assert_eq!(slot(1), 16, "post ran on every routed frame (shared map)");
    assert_eq!(slot(2), 4);
    assert_eq!(post.dropped(), 4);
    drop(ver);
    sw.finish().expect("finish");
    let out = |p: usize| {
        nfkit_pcap::read_file(dir.join(format!("out{p}.pcap")))
            .expect("read output")
            .into_iter()
            .map(|p| p.data)
            .collect::<Vec<_>>()
    };
    let (p2, p3) = (out(2), out(3));
    assert_eq!(p2.len(), 8, "198.18.1.0/24 to port 2");
    assert_eq!(
        p3.len(),
        4,
        "198.18.2.1 to port 3, 198.18.2.9 dropped by post"
    );
    assert!(
        p2.iter().chain(&p3).all(|f| f[22] == 63),
        "TTL written by route"
    );
    assert!(p3.iter().all(|f| f[33] == 1));
}
