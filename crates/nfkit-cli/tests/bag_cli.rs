//! `nfkit bag serve` and `nfkit bag client` as processes in a fresh
//! network namespace (`ip netns exec`): each filter mode counts what the
//! client sent, and every behaviour of the seed sends what it should.
//! Needs root (skipped otherwise).

mod common;
use common::{is_root, NFKIT};
use nfkit_kernel::testbed::Netns;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Starts `nfkit bag serve ARGS --json` in `ns`; returns once it listens.
fn serve(ns: &Netns, args: &[&str]) -> std::process::Child {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name(), NFKIT, "bag", "serve", "--json"])
        .args(["--idle-timeout", "5"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let err = child.stderr.take().expect("stderr");
    let mut line = String::new();
    BufReader::new(err)
        .read_line(&mut line)
        .expect("server line");
    assert!(line.contains("bag server on"), "server said: {line}");
    child
}

fn client(ns: &Netns, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), NFKIT, "bag", "client"])
        .args(args)
        .output()
        .expect("run client");
    assert!(
        out.status.success(),
        "client {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn report(child: std::process::Child) -> Value {
    let out = child.wait_with_output().expect("server exit");
    assert!(out.status.success(), "server failed");
    serde_json::from_slice(&out.stdout).expect("server JSON")
}

#[test]
fn each_filter_mode_counts_what_the_client_sent() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let ns = Netns::new("bagcli").expect("netns");
    for mode in ["kernel", "user", "none"] {
        // The default address, 127.0.0.1:12345; a queue that rides out
        // preemption on a busy machine (the default holds ~300 datagrams).
        let srv = serve(&ns, &["--filter", mode, "--rcvbuf", "4194304"]);
        let said = client(
            &ns,
            &[
                "FRIGG",
                "--packets",
                "4000",
                "--invalid-percent",
                "25",
                "--rate",
                "50000",
            ],
        );
        assert!(said.contains("sent 3000 valid"), "{said}");
        let r = report(srv);
        assert_eq!(r["stopped"], true, "{mode}: {r}");
        assert_eq!(r["puts"], 3000, "{mode}: {r}");
        assert_eq!(r["seqs"], 3000, "{mode}: {r}");
        match mode {
            "kernel" => {
                assert_eq!(r["filter"]["invalid"], 1000, "{r}");
                assert_eq!(r["received"], 3001, "{r}");
            }
            "user" => assert_eq!(r["user_invalid"], 1000, "{r}"),
            _ => assert_eq!(r["unparsed"], 1000, "{r}"),
        }
    }
}

#[test]
fn every_behaviour_sends_what_it_should() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let ns = Netns::new("bagbeh").expect("netns");
    let addr = "198.18.21.1:4000";
    ns.ip(&["addr", "add", "198.18.21.1/32", "dev", "lo"])
        .expect("address");
    let srv = serve(
        &ns,
        &["--addr", addr, "--filter", "user", "--rcvbuf", "4194304"],
    );
    // (behaviour, extra args): 12 datagrams unless said.
    let runs: [(&str, &[&str]); 8] = [
        ("thor", &[]),
        ("Odin", &["--wait-replies", "100"]),
        ("loki", &[]),
        ("njord", &[]),
        ("sylvie", &["--packets", "500"]),
        ("sif", &[]),
        ("frey", &["--packets", "100", "--invalid-percent", "10"]),
        ("frigg", &["--packets", "100", "--invalid-percent", "10"]),
    ];
    for (i, (b, extra)) in runs.iter().enumerate() {
        let mut args = vec![*b, "--addr", addr, "--rate", "20000"];
        args.extend_from_slice(extra);
        if i + 1 < runs.len() {
            args.push("--no-stop");
        }
        let said = client(&ns, &args);
        if *b == "Odin" {
            assert!(said.contains("6 replies"), "{said}");
        }
    }
    let r = report(srv);
    // PUT: thor 12, odin 6, loki 4, njord 3, sylvie 500, sif 6, frey 90, frigg 90.
    assert_eq!(r["puts"], 12 + 6 + 4 + 3 + 500 + 6 + 90 + 90, "{r}");
    // GET: odin 6, loki 4, njord 3, sif 6.
    assert_eq!(r["gets"], 6 + 4 + 3 + 6, "{r}");
    // DELETE: njord 6.
    assert_eq!(r["deletes"], 6, "{r}");
    // Invalid: loki 4, frey 10, frigg 10.
    assert_eq!(r["user_invalid"], 4 + 10 + 10, "{r}");
}
