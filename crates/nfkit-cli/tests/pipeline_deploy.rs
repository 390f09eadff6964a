//! A pipeline in the kernel with every position: `nfkit deploy
//! examples/router.py --hook tc-ingress --post-dev ...` runs `pre` and
//! the tables at TC ingress and attaches `post` at TC egress of every
//! output device; the
//! router's packets sent through veths give, per output port, the frames
//! (bytes) the VM and the software switch give, and `post` ran on each
//! (its counter). `nfkit map set ROUTES_default` changes what packets
//! without a route do. A redeploy with fewer output devices detaches
//! `post` from the others; undeploy removes them all.

mod common;
use common::router_bed::*;
use common::*;
use serde_json::Value;
use std::time::Duration;

/// The software switch (pcap ports p1..p4, the packets in on p1): the
/// frames out of p2 and p3, and what `post` counted.
fn switch_per_port(packets: &[(u64, Vec<u8>)]) -> (PerPort, u64) {
    use nfkit_switch::port::{any, PortSpec};
    use nfkit_switch::{Switch, SwitchConfig};
    let src = std::fs::read_to_string(examples().join("router.py")).expect("router.py");
    let opts = nfkit_lang::Options {
        hook: Some(nfkit_nf::Hook::Switch),
        ..nfkit_lang::Options::default()
    };
    let c =
        nfkit_lang::compile("examples/router.py", &src, &opts).unwrap_or_else(|e| panic!("{e}"));
    let dir = Dir::new("pipe-router-switch");
    let input = dir.path("in.pcap");
    let pk: Vec<nfkit_pcap::Packet> = packets
        .iter()
        .map(|(t, b)| nfkit_pcap::Packet::new(*t, b.clone()))
        .collect();
    nfkit_pcap::write_file(&input, &pk).expect("write input");
    let specs: Vec<PortSpec> = (1..=4)
        .map(|i| {
            let out = dir.path(&format!("out{i}.pcap"));
            let text = if i == 1 {
                format!("p1:pcap={input},out={out}")
            } else {
                format!("p{i}:pcap,out={out}")
            };
            text.parse().expect("port spec")
        })
        .collect();
    let ports = any::open_all(&specs, 1).expect("open ports");
    let cfg = SwitchConfig {
        workers: 1,
        pin: false,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&c, ports, &cfg).expect("start the switch");
    while !sw.is_done() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ver = sw.script();
    let stats = ver.vm.map("stats").expect("stats");
    let v = stats
        .lookup(&3u32.to_le_bytes())
        .expect("lookup")
        .expect("slot 3");
    let counted = le(&v);
    drop(ver);
    sw.finish().expect("finish");
    let out = |p: usize| -> Vec<Vec<u8>> {
        nfkit_pcap::read_file(dir.0.join(format!("out{p}.pcap")))
            .expect("read output")
            .into_iter()
            .map(|p| p.data)
            .collect()
    };
    ([out(2), out(3)], counted)
}

/// `nfkit ARGS --netns ROUTER` with the scratch paths; its JSON.
fn nfkit_json(bed: &RouterBed, s: &Scratch, args: &[&str]) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--netns", bed.router.name(), "--json"]);
    json(&output_ok(nfkit_cmd(None, s), &all))
}

/// The post deployments `status` lists, by device.
fn posts(s: &Scratch) -> Vec<String> {
    let st = json(&output_ok(nfkit_cmd(None, s), &["status", "--json"]));
    post_devs(&st)
}

#[test]
fn router_deployed_runs_post_at_egress_and_matches_the_vm_and_the_switch() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let packets = router_packets();
    let (vm, vm_routed) = vm_per_port(&packets);
    let (sw, sw_counted) = switch_per_port(&packets);
    assert_eq!(sw, vm, "the switch's frames per port are the VM's");
    assert_eq!(
        sw_counted, vm_routed,
        "the switch's post ran on every routed frame"
    );
    assert_eq!(vm_routed, 10, "5 routed + 5 of the rate-limited source");

    let bed = RouterBed::new();
    let s = Scratch::new("pipe-router");
    let script = examples().join("router.py").display().to_string();
    let d = nfkit_json(
        &bed,
        &s,
        &[
            "deploy",
            &script,
            "--dev",
            IN,
            "--hook",
            "tc-ingress",
            "--post-dev",
            IN,
            "--post-dev",
            OUT[0],
            "--post-dev",
            OUT[1],
        ],
    );
    let mut post_devs: Vec<&str> = d["posts"]
        .as_array()
        .expect("posts")
        .iter()
        .map(|p| p["dev"].as_str().unwrap_or(""))
        .collect();
    post_devs.sort();
    assert_eq!(post_devs, [IN, OUT[0], OUT[1]], "every device: {d}");
    assert_eq!(posts(&s), [IN, OUT[0], OUT[1]]);

    let got = bed.send_and_capture(&packets);
    assert_eq!(got[0], vm[0], "port 2: the kernel's frames are the VM's");
    assert_eq!(got[1], vm[1], "port 3: the kernel's frames are the VM's");
    let stat = |k: &str| -> u64 {
        let out = output_ok(
            nfkit_cmd(None, &s),
            &["map", "get", "stats", k, "--dev", IN],
        );
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("stats[{k}]: {out}"))
    };
    assert_eq!(
        stat("3"),
        vm_routed,
        "post ran at egress on every routed frame"
    );
    assert_eq!(stat("2"), 7, "the rate-limited source's drops (pre's map)");

    // The routes' default (DROP, action 1) is a map: `nfkit map set`
    // makes misses take route(port 3, next hop 3) instead, from the next
    // packet on (198.18.3.1 has no route).
    let get_default = || {
        output_ok(
            nfkit_cmd(None, &s),
            &["map", "get", "ROUTES_default", "0", "--dev", IN],
        )
        .trim()
        .to_string()
    };
    assert_eq!(get_default(), (1u64 << 56).to_string(), "declared DROP");
    let word = (3u64 << 48) | 0x0200_0000_0301; // action 0 (route)
    output_ok(
        nfkit_cmd(None, &s),
        &[
            "map",
            "set",
            "ROUTES_default",
            "0",
            &format!("{word:#x}"),
            "--dev",
            IN,
        ],
    );
    assert_eq!(get_default(), word.to_string());
    let unrouted = &packets[3].1;
    assert_eq!(
        &unrouted[30..34],
        &[198, 18, 3, 1],
        "the packet without a route"
    );
    let [by2, out] = bed.send_and_capture(&[(0, unrouted.clone())]);
    assert!(by2.is_empty(), "nothing out of port 2");
    assert_eq!(out.len(), 1, "the miss went out of port 3");
    assert_eq!(&out[0][..6], &[2, 0, 0, 0, 3, 1], "next hop 3's MAC");
    assert_eq!(out[0][22], 63, "TTL decremented by route");
    assert_eq!(stat("3"), vm_routed + 1, "post ran on it too");

    // A redeploy with two output devices detaches post from the third.
    let d = nfkit_json(
        &bed,
        &s,
        &[
            "deploy",
            &script,
            "--dev",
            IN,
            "--hook",
            "tc-ingress",
            "--post-dev",
            OUT[0],
            "--post-dev",
            OUT[1],
        ],
    );
    assert_eq!(d["swapped"], true, "{d}");
    assert_eq!(posts(&s), [OUT[0], OUT[1]]);
    // Undeploy takes the post programs with the ingress one.
    output_ok(nfkit_cmd(None, &s), &["undeploy", "--dev", IN]);
    let st = json(&output_ok(nfkit_cmd(None, &s), &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(0), "{st}");
}
