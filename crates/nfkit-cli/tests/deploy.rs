//! `nfkit deploy/status/map/undeploy` on a veth in a network namespace,
//! and `nfkit prog test` against `nfkit run`. Needs root; skipped
//! otherwise. Each test uses its own bpffs mount and state directory
//! (`NFKIT_PIN_ROOT`, `NFKIT_STATE_DIR`), so it never touches a real
//! deployment; namespaces, the veth and the bpffs mount are removed by
//! RAII guards even when an assertion fails.

mod common;
use common::{examples, is_root, json, nfkit, nfkit_host, nfkit_ok, Pair, Scratch, NFKIT};
use nfkit_kernel::testbed::Netns;
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An IPv4/UDP frame from 198.18.1.2 to 198.18.1.1, destination `port`.
fn udp_frame(port: u16) -> Vec<u8> {
    common::udp_frame(
        Ipv4Addr::new(198, 18, 1, 2),
        Ipv4Addr::new(198, 18, 1, 1),
        port,
    )
}

/// Sends `count` copies of `frame` on `dev` from inside `ns` with nfkit's
/// own sender (an AF_PACKET socket).
fn send(ns: &Netns, dev: &str, frame: &[u8], count: u32) {
    send_paced(ns, dev, frame, count, 0.0);
}

/// Like [`send`], at most one frame every `gap` seconds.
fn send_paced(ns: &Netns, dev: &str, frame: &[u8], count: u32, gap: f64) {
    use nfkit_traffic::send::{send as send_frames, SendOptions, Source};
    let opts = SendOptions {
        dev: dev.to_string(),
        netns: Some(ns.name().to_string()),
        rate: (gap > 0.0).then(|| 1.0 / gap),
        count: Some(u64::from(count)),
        ..SendOptions::default()
    };
    let r = send_frames(&Source::Frames(vec![frame.to_vec()]), &opts).expect("send frames");
    assert_eq!(r.sent, u64::from(count), "frames sent");
}

/// The value of `key` in a `map dump --json`.
fn dumped(dump: &Value, key: u64) -> Option<u64> {
    dump.as_array()?
        .iter()
        .find(|e| e["key"] == key)
        .and_then(|e| e["value"].as_u64())
}

#[test]
fn deploy_count_swap_undeploy() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("deploy");
    let Pair { sut, peer, veth } = Pair::new("sut", "peer", "198.18.1");
    let dev = veth.a.dev.as_str();
    let script = examples().join("port_stats.py");
    let script = script.to_str().expect("utf-8 path");

    let d1 = json(&nfkit_ok(
        &sut,
        &s,
        &["deploy", script, "--dev", dev, "--hook", "xdp", "--json"],
    ));
    assert_eq!(d1["swapped"], false);
    let link = d1["deployment"]["link_id"].as_u64().expect("link id");
    let prog1 = d1["deployment"]["prog_id"].as_u64().expect("prog id");
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(shown.contains(&format!("prog/xdp id {prog1}")), "{shown}");

    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    let deps = st["deployments"].as_array().expect("deployments");
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0]["dev"], dev);
    assert_eq!(deps[0]["hook"], "xdp");
    assert_eq!(deps[0]["attached"], true);
    assert_eq!(deps[0]["live_prog_id"].as_u64(), Some(prog1));

    send(&peer, &veth.b.dev, &udp_frame(4000), 3);
    let dump = json(&nfkit_ok(&sut, &s, &["map", "dump", "packets", "--json"]));
    assert_eq!(dumped(&dump, 4000), Some(3), "{dump}");
    assert_eq!(
        nfkit_ok(&sut, &s, &["map", "get", "packets", "4000"]).trim(),
        "3"
    );

    // Redeploy: the link is updated in place, the counters are kept.
    let d2 = json(&nfkit_ok(
        &sut,
        &s,
        &["deploy", script, "--dev", dev, "--hook", "xdp", "--json"],
    ));
    assert_eq!(d2["swapped"], true);
    assert_eq!(d2["deployment"]["link_id"].as_u64(), Some(link));
    let prog2 = d2["deployment"]["prog_id"].as_u64().expect("prog id");
    assert_ne!(prog1, prog2);
    assert!(d2["reused_maps"]
        .as_array()
        .is_some_and(|m| m.iter().any(|x| x == "packets")));
    send(&peer, &veth.b.dev, &udp_frame(4000), 2);
    let dump = json(&nfkit_ok(&sut, &s, &["map", "dump", "packets", "--json"]));
    assert_eq!(dumped(&dump, 4000), Some(5), "{dump}");
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(shown.contains(&format!("prog/xdp id {prog2}")), "{shown}");

    // Maps written from the command line are what the program sees:
    // a blocked port drops.
    nfkit_ok(&sut, &s, &["map", "set", "blocked", "4001", "0"]);
    send(&peer, &veth.b.dev, &udp_frame(4001), 4);
    assert_eq!(
        nfkit_ok(&sut, &s, &["map", "get", "blocked", "4001"]).trim(),
        "4"
    );
    nfkit_ok(&sut, &s, &["map", "delete", "blocked", "4001"]);
    let (ok, _, err) = nfkit(&sut, &s, &["map", "get", "blocked", "4001"]);
    assert!(!ok, "{err}");
    assert_eq!(err, "error: map `blocked`: no such key 4001\n");

    let (ok, _, err) = nfkit(
        &sut,
        &s,
        &["deploy", script, "--dev", dev, "--mode", "dynamc"],
    );
    // clap refuses it and lists the modes.
    assert!(
        !ok && err.contains("invalid value 'dynamc' for '--mode <MODE>'")
            && err.contains("static")
            && err.contains("dynamic"),
        "{err}"
    );

    nfkit_ok(&sut, &s, &["undeploy", "--dev", dev]);
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(!shown.contains("prog/xdp"), "{shown}");
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(0));
    assert!(!s.state().join("state.json").exists());
    let left: Vec<_> = std::fs::read_dir(s.bpf())
        .expect("bpffs")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".debug"))
        .collect();
    assert!(left.is_empty(), "pins left: {left:?}");
}

#[test]
fn tc_ingress_through_tcx() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("tcx");
    let Pair { sut, peer, veth } = Pair::new("sut", "peer", "198.18.2");
    let dev = veth.a.dev.as_str();
    let script = examples().join("port_stats.py");
    let script = script.to_str().expect("utf-8 path");
    let d = json(&nfkit_ok(
        &sut,
        &s,
        &[
            "deploy",
            script,
            "--dev",
            dev,
            "--hook",
            "tc-ingress",
            "--json",
        ],
    ));
    assert_eq!(d["deployment"]["hook"], "tc-ingress");
    send(&peer, &veth.b.dev, &udp_frame(5000), 2);
    assert_eq!(
        nfkit_ok(&sut, &s, &["map", "get", "packets", "5000"]).trim(),
        "2"
    );
    nfkit_ok(&sut, &s, &["undeploy"]);
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(0));
}

#[test]
fn prog_test_gives_the_vm_verdicts() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for name in ["port_stats", "flow_limiter", "ddos"] {
        let script = examples().join(format!("{name}.py"));
        let pcap = examples().join(format!("{name}.pcap"));
        let run = |args: &[&str]| {
            let out = Command::new(NFKIT)
                .args(args)
                .arg(&script)
                .arg("--pcap")
                .arg(&pcap)
                .output()
                .expect("nfkit");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            json(&String::from_utf8_lossy(&out.stdout))
        };
        let vm = run(&["run", "--json", "--trace"]);
        let k = run(&["prog", "test", "--json"]);
        let vm_codes: Vec<u64> = vm["per_packet"]
            .as_array()
            .expect("per_packet")
            .iter()
            .filter_map(|p| p["code"].as_u64())
            .collect();
        let k_codes: Vec<u64> = k["packets"]
            .as_array()
            .expect("packets")
            .iter()
            .filter_map(|p| p["retval"].as_u64())
            .collect();
        assert!(!k_codes.is_empty(), "{name}: no packets");
        assert_eq!(vm_codes, k_codes, "{name}: verdicts VM / kernel");
    }
}

#[test]
fn redeploy_after_the_device_came_back() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("gone");
    let sut = Netns::new("sut").expect("netns");
    let (dev, peer) = ("nfkgone0", "nfkgone1");
    let make = || {
        sut.ip(&["link", "add", dev, "type", "veth", "peer", "name", peer])
            .expect("veth");
        sut.ip(&["link", "set", dev, "up"]).expect("up");
    };
    make();
    let script = examples().join("ddos.py");
    let script = script.to_str().expect("utf-8 path");
    let args = [
        "deploy",
        script,
        "--dev",
        dev,
        "--hook",
        "xdp-generic",
        "--json",
    ];
    let d1 = json(&nfkit_ok(&sut, &s, &args));
    sut.ip(&["link", "del", dev]).expect("del");
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"][0]["attached"], false, "{st}");
    make();
    let d2 = json(&nfkit_ok(&sut, &s, &args));
    assert_eq!(d2["swapped"], false);
    assert_ne!(d1["deployment"]["link_id"], d2["deployment"]["link_id"]);
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"][0]["attached"], true, "{st}");
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(shown.contains("prog/xdp"), "{shown}");
    nfkit_ok(&sut, &s, &["undeploy"]);
}

#[test]
fn swaps_under_traffic_lose_no_packet() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("swap");
    let Pair { sut, peer, veth } = Pair::new("sut", "peer", "198.18.3");
    let dev = veth.a.dev.as_str();
    let script = examples().join("port_stats.py");
    let script = script.to_str().expect("utf-8 path");
    let args = ["deploy", script, "--dev", dev, "--hook", "xdp", "--json"];
    let first = json(&nfkit_ok(&sut, &s, &args));
    let link = first["deployment"]["link_id"].clone();
    const SENT: u32 = 2000;
    let swaps = std::thread::scope(|sc| {
        let sender = sc.spawn(|| send_paced(&peer, &veth.b.dev, &udp_frame(4100), SENT, 0.001));
        let mut swaps = 0;
        while !sender.is_finished() {
            let d = json(&nfkit_ok(&sut, &s, &args));
            assert_eq!(d["swapped"], true);
            assert_eq!(d["deployment"]["link_id"], link);
            swaps += 1;
        }
        sender.join().expect("sender");
        swaps
    });
    assert!(swaps >= 2, "only {swaps} swaps while sending");
    // Every frame met exactly one version, and all versions count into
    // the shared maps: port_stats counts a port's first 6 packets in
    // `packets`, then blocks it and counts each later packet in `blocked`.
    let dump = json(&nfkit_ok(&sut, &s, &["map", "dump", "blocked", "--json"]));
    assert_eq!(
        dumped(&dump, 4100),
        Some(u64::from(SENT - 6) % 256),
        "{dump} after {swaps} swaps"
    );
    nfkit_ok(&sut, &s, &["undeploy"]);
}

/// Runs nfkit in the test's own namespaces (no `ip netns exec`).
#[test]
fn deploy_into_a_named_netns_from_outside() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("netns");
    let Pair { sut, peer, veth } = Pair::new("sut", "peer", "198.18.4");
    let dev = veth.a.dev.as_str();
    let script = examples().join("port_stats.py");
    let script = script.to_str().expect("utf-8 path");
    let d = json(&nfkit_host(
        &s,
        &[
            "deploy",
            script,
            "--dev",
            dev,
            "--netns",
            sut.name(),
            "--hook",
            "xdp-generic",
            "--json",
        ],
    ));
    assert_eq!(d["deployment"]["netns"], sut.name());
    // The deploying process is gone; the program stays attached.
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(shown.contains("prog/xdp"), "{shown}");
    let st = json(&nfkit_host(&s, &["status", "--json"]));
    assert_eq!(st["deployments"][0]["attached"], true, "{st}");
    send(&peer, &veth.b.dev, &udp_frame(4200), 2);
    assert_eq!(
        nfkit_host(&s, &["map", "get", "packets", "4200"]).trim(),
        "2"
    );
    nfkit_host(&s, &["undeploy", "--dev", dev]);
    let shown = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(!shown.contains("prog/xdp"), "{shown}");
}

/// A chain that calls NFs, counting port-4100 packets at `hits[version]`.
fn dyn_script(version: u32, extra_nf: bool) -> String {
    let (import, call) = if extra_nf {
        ("from nf.sample import one_in\n", "    one_in(1)\n")
    } else {
        ("", "")
    };
    format!(
        "from nf.monitor import count\nfrom nf.meter import tb_dst\n{import}\
         from nf.classify import every_packet\n\n\
         hits = ArrayMap(u64, 4)\n\n\
         def chain() -> u64:\n    count(1)\n{call}\
         \x20   if tb_dst(1000000, 1000000) != 0:\n        return PASS\n\
         \x20   if Packet.l4_off != 0 and Packet.dport == 4100:\n\
         \x20       hits[{version}] += 1\n        return DROP\n\
         \x20   hits[3] += 1\n    return PASS\n\n\
         every_packet(chain)\n"
    )
}

/// `(entry, prog id)` of the NFs a dynamic deployment keeps loaded.
fn dyn_nfs(d: &Value) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = d["dynamic"]["nfs"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| {
                    (
                        n["entry"].as_str().unwrap_or("").to_string(),
                        n["prog_id"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every file under `dir` (pins left on the scratch bpffs).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else if !p.ends_with("progs.debug") && !p.ends_with("maps.debug") {
                // (bpffs's own files excepted)
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn dynamic_mode_changes_chains_without_reloading_nfs() {
    dynamic_chain_changes("xdp", "dsut", "dpeer", "198.18.5");
}

#[test]
fn dynamic_mode_at_tc_ingress() {
    dynamic_chain_changes("tc-ingress", "dtsut", "dtpeer", "198.18.7");
}

/// Dynamic deploys on `hook`: chain changes keep the NF programs, the
/// classifier and the link; a new NF loads alone; maps are kept; back to
/// static mode; nothing left after undeploy.
fn dynamic_chain_changes(hook: &str, sut_tag: &str, peer_tag: &str, net: &str) {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new(&format!("dyn-{hook}"));
    let Pair { sut, peer, veth } = Pair::new(sut_tag, peer_tag, net);
    let dev = veth.a.dev.as_str();
    let mut files = Vec::new();
    for (i, (v, extra)) in [(0, false), (1, false), (2, true)].into_iter().enumerate() {
        let f = s.dir.join(format!("v{i}.py"));
        std::fs::write(&f, dyn_script(v, extra)).expect("script");
        files.push(f.display().to_string());
    }
    let deploy = |f: &str| {
        json(&nfkit_ok(
            &sut,
            &s,
            &[
                "deploy", f, "--dev", dev, "--hook", hook, "--mode", "dynamic", "--json",
            ],
        ))
    };
    let hits = |k: u64| {
        let dump = json(&nfkit_ok(&sut, &s, &["map", "dump", "hits", "--json"]));
        dumped(&dump, k).unwrap_or(0)
    };

    let first = deploy(&files[0]);
    let d1 = &first["deployment"];
    assert_eq!(d1["mode"], "dynamic", "{first}");
    assert_eq!(d1["entry"], "dyn_every_packet");
    let nfs1 = dyn_nfs(d1);
    let names: Vec<&str> = nfs1.iter().map(|n| n.0.as_str()).collect();
    assert_eq!(names, ["dyn_count", "dyn_tb_dst"], "{first}");
    assert!(nfs1.iter().all(|n| n.1 > 0));
    send(&peer, &veth.b.dev, &udp_frame(4100), 10);
    assert_eq!(hits(0), 10);

    // A chain change: same NF programs, same classifier and link; the
    // segments moved to the other bank; the shared map kept its counts.
    let second = deploy(&files[1]);
    let d2 = &second["deployment"];
    assert_eq!(second["swapped"], true);
    assert_eq!(dyn_nfs(d2), nfs1, "NFs were reloaded: {second}");
    assert_eq!(d2["link_id"], d1["link_id"]);
    assert_eq!(d2["prog_id"], d1["prog_id"]);
    assert_ne!(d2["dynamic"]["bank"], d1["dynamic"]["bank"]);
    assert!(second["switch_us"].as_u64().is_some());
    send(&peer, &veth.b.dev, &udp_frame(4100), 7);
    assert_eq!((hits(0), hits(1)), (10, 7));

    // A version with one more NF loads only that one.
    let third = deploy(&files[2]);
    let nfs3 = dyn_nfs(&third["deployment"]);
    for n in &nfs1 {
        assert!(nfs3.contains(n), "{n:?} changed: {third}");
    }
    assert!(
        nfs3.iter().any(|n| n.0 == "dyn_one_in" && n.1 > 0),
        "{third}"
    );
    send(&peer, &veth.b.dev, &udp_frame(4100), 3);
    assert_eq!((hits(0), hits(1), hits(2)), (10, 7, 3));
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"][0]["mode"], "dynamic", "{st}");
    assert_eq!(st["deployments"][0]["attached"], true, "{st}");

    // Back to static mode: one program again, the map still kept.
    let back = json(&nfkit_ok(
        &sut,
        &s,
        &["deploy", &files[0], "--dev", dev, "--hook", hook, "--json"],
    ));
    assert_eq!(back["deployment"]["mode"], "static", "{back}");
    assert!(back["deployment"]["dynamic"].is_null(), "{back}");
    send(&peer, &veth.b.dev, &udp_frame(4100), 2);
    assert_eq!(hits(0), 12);

    nfkit_ok(&sut, &s, &["undeploy"]);
    assert_eq!(files_under(&s.bpf()), Vec::<PathBuf>::new());
}

#[test]
fn dynamic_redeploy_keeps_only_the_new_classifier_entries() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dyncls");
    let Pair {
        sut,
        peer: _peer,
        veth,
    } = Pair::new("dcsut", "dcpeer", "198.18.6");
    let dev = veth.a.dev.as_str();
    let full = examples().join("dscp_dispatch.py");
    let text = std::fs::read_to_string(&full).expect("script");
    // The second version dispatches EF (46) and AF41 (34) but no longer CS1 (8).
    let fewer = s.dir.join("fewer.py");
    std::fs::write(
        &fewer,
        text.replace(
            "by_dscp({EF: voice, AF41: video, CS1: scavenger}",
            "by_dscp({EF: voice, AF41: video}",
        ),
    )
    .expect("script");
    let deploy = |f: &Path| {
        nfkit_ok(
            &sut,
            &s,
            &[
                "deploy",
                f.to_str().unwrap_or(""),
                "--dev",
                dev,
                "--mode",
                "dynamic",
            ],
        )
    };
    let valid = || -> Vec<u64> {
        let dump = json(&nfkit_ok(
            &sut,
            &s,
            &["map", "dump", "nfkit_cls_dscp", "--json"],
        ));
        let mut keys: Vec<u64> = dump
            .as_array()
            .map(|a| {
                a.iter()
                    // struct nf_cls_entry {u32 chain_id; u32 flags}, typed:
                    // flags NF_CLS_VALID.
                    .filter(|e| e["value"]["flags"] == 1)
                    .filter_map(|e| e["key"].as_u64())
                    .collect()
            })
            .unwrap_or_default();
        keys.sort();
        keys
    };
    deploy(&full);
    assert_eq!(valid(), [8, 34, 46]);
    deploy(&fewer);
    assert_eq!(valid(), [34, 46], "CS1's entry outlived its chain");
    nfkit_ok(&sut, &s, &["undeploy"]);
}
