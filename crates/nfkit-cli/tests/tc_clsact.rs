//! `nfkit deploy --hook tc-ingress` through the clsact fallback
//! (`NFKIT_TC_ATTACH=clsact`; this kernel has tcx, so the fallback is
//! forced), next to an XDP deployment of the same script on the same
//! device: status says how each is attached, `nfkit map ... --hook`
//! picks one of the two, traffic is counted by both, a redeploy
//! replaces the filter in place and keeps the maps, undeploy (from
//! outside the namespace) removes the filter, the qdisc nfkit made and
//! the XDP link. Needs root (skipped otherwise).

mod common;
use common::{examples, is_root, json, nfkit_cmd, output, output_ok, tc, Pair, Scratch};
use nfkit_kernel::testbed::Netns;
use nfkit_traffic::send::{send, SendOptions, Source};
use std::net::Ipv4Addr;
use std::process::Command;

/// The nfkit command with the scratch paths, clsact forced.
fn clsact(s: &Scratch) -> Command {
    let mut c = nfkit_cmd(None, s);
    c.env("NFKIT_TC_ATTACH", "clsact");
    c
}

/// Runs nfkit (clsact forced); (ok, stdout, stderr).
fn nfkit(s: &Scratch, args: &[&str]) -> (bool, String, String) {
    output(clsact(s), args)
}

fn nfkit_ok(s: &Scratch, args: &[&str]) -> String {
    output_ok(clsact(s), args)
}

/// An IPv4/UDP frame from 198.18.42.2 to 198.18.42.1, destination `port`.
fn udp_frame(port: u16) -> Vec<u8> {
    common::udp_frame(
        Ipv4Addr::new(198, 18, 42, 2),
        Ipv4Addr::new(198, 18, 42, 1),
        port,
    )
}

fn send_n(ns: &Netns, dev: &str, port: u16, n: u64) {
    send(
        &Source::Frames(vec![udp_frame(port)]),
        &SendOptions {
            dev: dev.to_string(),
            netns: Some(ns.name().to_string()),
            count: Some(n),
            ..SendOptions::default()
        },
    )
    .expect("send");
}

/// Waits (up to 2 s) until `map get packets PORT --hook HOOK` says `want`.
fn packets(s: &Scratch, port: u16, hook: &str, want: &str) -> String {
    let p = port.to_string();
    let args = ["map", "get", "packets", &p, "--hook", hook];
    let t0 = std::time::Instant::now();
    loop {
        let (ok, out, _) = nfkit(s, &args);
        let got = if ok {
            out.trim().to_string()
        } else {
            String::new()
        };
        if got == want || t0.elapsed() > std::time::Duration::from_secs(2) {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn tc_through_clsact_next_to_xdp_with_map_hook() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("clsact-cli");
    let Pair { sut, peer, veth } = Pair::new("sut", "peer", "198.18.42");
    let dev = veth.a.dev.as_str();
    let script = examples().join("port_stats.py");
    let script = script.to_str().expect("utf-8 path");
    let deploy = |hook: &str| {
        json(&nfkit_ok(
            &s,
            &[
                "deploy",
                script,
                "--dev",
                dev,
                "--netns",
                sut.name(),
                "--hook",
                hook,
                "--json",
            ],
        ))
    };
    let x = deploy("xdp-generic");
    assert_eq!(x["deployment"]["attach"]["kind"], "link", "{x}");
    let t1 = deploy("tc-ingress");
    let a1 = t1["deployment"]["attach"].clone();
    assert_eq!(a1["kind"], "clsact", "{t1}");
    assert_eq!(a1["qdisc_created"], true, "{t1}");
    assert_eq!(t1["deployment"]["link_id"], 0);
    let prog1 = t1["deployment"]["prog_id"].as_u64().expect("prog id");
    let f = tc(&sut, &["filter", "show", "dev", dev, "ingress"]);
    assert!(f.contains(&format!("id {prog1} ")), "{f}");

    let st = json(&nfkit_ok(&s, &["status", "--json"]));
    let deps = st["deployments"].as_array().expect("deployments");
    let kinds: Vec<(&str, &str, bool)> = deps
        .iter()
        .map(|d| {
            (
                d["hook"].as_str().unwrap_or(""),
                d["attach_kind"].as_str().unwrap_or(""),
                d["attached"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("xdp-generic", "xdp-link", true),
            ("tc-ingress", "clsact", true)
        ],
        "{st}"
    );
    let text = nfkit_ok(&s, &["status"]);
    assert!(text.contains("via clsact (handle 0x1"), "{text}");
    assert!(text.contains("via xdp-link"), "{text}");

    // Both programs see the traffic: XDP passes it on to TC.
    send_n(&peer, &veth.b.dev, 4000, 3);
    assert_eq!(packets(&s, 4000, "tc-ingress", "3"), "3");
    assert_eq!(packets(&s, 4000, "xdp-generic", "3"), "3");
    let (ok, _, err) = nfkit(&s, &["map", "get", "packets", "4000"]);
    assert!(!ok && err.contains("--hook"), "{err}");
    let listed = json(&nfkit_ok(
        &s,
        &["map", "list", "--hook", "tc-ingress", "--json"],
    ));
    let rows = listed.as_array().expect("rows");
    assert!(!rows.is_empty() && rows.iter().all(|r| r["hook"] == "tc-ingress"));
    nfkit_ok(
        &s,
        &["map", "set", "packets", "4000", "1", "--hook", "tc-ingress"],
    );
    assert_eq!(packets(&s, 4000, "xdp-generic", "3"), "3");

    // Redeploy: the same filter runs the new program; maps are kept.
    let t2 = deploy("tc-ingress");
    assert_eq!(t2["swapped"], true, "{t2}");
    assert_eq!(t2["deployment"]["attach"], a1, "{t2}");
    let prog2 = t2["deployment"]["prog_id"].as_u64().expect("prog id");
    assert_ne!(prog1, prog2);
    let f = tc(&sut, &["filter", "show", "dev", dev, "ingress"]);
    assert!(f.contains(&format!("id {prog2} ")), "{f}");
    assert_eq!(f.matches("direct-action").count(), 1, "{f}");
    send_n(&peer, &veth.b.dev, 4000, 1);
    assert_eq!(packets(&s, 4000, "tc-ingress", "2"), "2");

    nfkit_ok(&s, &["undeploy", "--dev", dev]);
    let st = json(&nfkit_ok(&s, &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(0));
    let qd = tc(&sut, &["qdisc", "show", "dev", dev]);
    assert!(!qd.contains("clsact"), "{qd}");
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(!shown.contains("prog/xdp"), "{shown}");
}
