//! `nfkit deploy FILE.o`: one program of a plain eBPF object deployed on
//! a veth, with `--type` for legacy section names (`xdp_counter`, `prog`),
//! counted by real traffic, managed by `status`, `map` and `undeploy`
//! like a script. Needs root; skipped otherwise. Namespaces, the veth and
//! the private bpffs mount are removed by RAII guards even on failure.

mod common;
use common::{is_root, json, nfkit, nfkit_ok, Pair, Scratch};
use nfkit_kernel::testbed::Netns;
use std::net::Ipv4Addr;
use std::path::Path;

/// `tests/progs/legacy_counter.c` built into the scratch state directory.
fn build(s: &Scratch) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/progs/legacy_counter.c");
    std::fs::create_dir_all(s.state()).expect("state dir");
    let out = s.state().join("legacy_counter.o");
    nfkit_corpus::BpfBuild::new(src)
        .out(&out)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    out.display().to_string()
}

/// Sends `count` UDP frames to `port` on `dev` from inside `ns`.
fn send(ns: &Netns, dev: &str, port: u16, count: u64) {
    let frame = common::udp_frame(
        Ipv4Addr::new(198, 18, 31, 2),
        Ipv4Addr::new(198, 18, 31, 1),
        port,
    );
    common::send_frames(ns, dev, frame, count);
}

/// `nfkit map get by_port PORT` as a number (`None`: no such key).
fn counted(sut: &Netns, s: &Scratch, port: u16) -> Option<u64> {
    let (ok, out, _) = nfkit(sut, s, &["map", "get", "by_port", &port.to_string()]);
    ok.then(|| out.trim().parse().expect("a count"))
}

#[test]
fn an_object_with_legacy_sections_deploys_with_its_type() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("deploy-object");
    let Pair { sut, peer, veth } = Pair::new("do-sut", "do-peer", "198.18.31");
    let obj = build(&s);
    let dev = veth.a.dev.as_str();

    // Without --type the section gives no type: refused, saying so.
    let (ok, _, err) = nfkit(
        &sut,
        &s,
        &["deploy", &obj, "--dev", dev, "--section", "xdp_counter"],
    );
    assert!(
        !ok && err.contains("xdp_counter") && err.contains("--type"),
        "{err}"
    );
    // A socket filter has no interface to attach to.
    let (ok, _, err) = nfkit(
        &sut,
        &s,
        &["deploy", &obj, "--dev", dev, "--section", "socket"],
    );
    assert!(!ok && err.contains("socket"), "{err}");
    // An XDP program at a TC hook is refused.
    let args = [
        "deploy",
        &obj,
        "--dev",
        dev,
        "--type",
        "xdp",
        "--section",
        "xdp_counter",
    ];
    let (ok, _, err) = nfkit(&sut, &s, &[&args[..], &["--hook", "tc-ingress"]].concat());
    assert!(!ok && err.contains("tc-ingress"), "{err}");
    // Nothing was deployed by the refusals.
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(0), "{st}");

    // XDP (generic: the peer sends, nothing is redirected).
    let d = json(&nfkit_ok(
        &sut,
        &s,
        &[&args[..], &["--hook", "xdp-generic", "--json"]].concat(),
    ));
    assert_eq!(d["deployment"]["hook"], "xdp-generic", "{d}");
    assert_eq!(d["deployment"]["entry"], "count_xdp", "{d}");
    send(&peer, veth.b.dev.as_str(), 4000, 30);
    send(&peer, veth.b.dev.as_str(), 9, 5);
    assert_eq!(counted(&sut, &s, 4000), Some(30));
    assert_eq!(counted(&sut, &s, 9), Some(5));
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    let source = st["deployments"][0]["source"].as_str().unwrap_or_default();
    assert!(source.ends_with("legacy_counter.o"), "{st}");

    // The TC program of section `prog` replaces nothing: another hook.
    let tc = [
        "deploy",
        &obj,
        "--dev",
        dev,
        "--type",
        "tc",
        "--section",
        "prog",
        "--json",
    ];
    let d = json(&nfkit_ok(&sut, &s, &tc));
    assert_eq!(d["deployment"]["hook"], "tc-ingress", "{d}");
    assert_eq!(d["deployment"]["entry"], "tc_count", "{d}");
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(2), "{st}");

    nfkit_ok(&sut, &s, &["undeploy"]);
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"].as_array().map(Vec::len), Some(0), "{st}");
    let shown = sut
        .ip(&["-d", "link", "show", "dev", dev])
        .expect("ip link");
    assert!(!shown.contains("xdp"), "detached: {shown}");
}
