//! A pipeline deployed through nfkitd with its output devices: `nfkit
//! deploy examples/router.py --hook tc-ingress --post-dev ...` carries
//! them in the DeployRequest (`post_devs`, API v1.2) and prints what it
//! prints directly; `post` is attached at the TC egress of every output
//! device; the router's frames leave by each port as the VM sends them
//! and `post` counts each routed frame; a redeploy through nfkitd with
//! fewer devices detaches the others; undeploy removes all. The
//! testbed is `pipeline_deploy.rs`'s (tests/common/router_bed.rs).
//! Needs root.

mod common;
use common::daemon_cli::{self, Conn};
use common::router_bed::*;
use common::{examples, is_root, Scratch};
use serde_json::Value;
use std::path::Path;

/// `nfkit ARGS` with the scratch paths, NFKIT_DAEMON `daemon`.
fn nfkit(s: &Scratch, run: &Path, daemon: &str, args: &[&str]) -> (i32, String, String) {
    daemon_cli::nfkit(s, run, &Conn::daemon(daemon), args)
}

/// `nfkit deploy SCRIPT` of the router on `bed` at TC ingress with
/// `posts` as output devices.
fn deploy_args<'a>(script: &'a str, bed: &'a RouterBed, posts: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "deploy",
        script,
        "--dev",
        IN,
        "--netns",
        bed.router.name(),
        "--hook",
        "tc-ingress",
    ];
    for p in posts {
        args.extend(["--post-dev", *p]);
    }
    args
}

/// Deploys the router on `bed` with `posts` as output devices; the
/// JSON, ids and times left out.
fn deploy(s: &Scratch, run: &Path, daemon: &str, bed: &RouterBed, posts: &[&str]) -> Value {
    let script = examples().join("router.py").display().to_string();
    let mut args = deploy_args(&script, bed, posts);
    args.push("--json");
    let (code, o, e) = nfkit(s, run, daemon, &args);
    assert_eq!(code, 0, "deploy ({daemon}): {o}{e}");
    let mut v: Value = serde_json::from_str(&o).unwrap_or_else(|e| panic!("{e}: {o}"));
    daemon_cli::scrub(&mut v, &["generation", "swapped"]);
    v
}

/// The devices of the post deployments `status` lists (attached at TC
/// egress).
fn posts(s: &Scratch, run: &Path, daemon: &str) -> Vec<String> {
    let (code, o, e) = nfkit(s, run, daemon, &["status", "--json"]);
    assert_eq!(code, 0, "{o}{e}");
    post_devs(&serde_json::from_str(&o).unwrap_or_else(|e| panic!("{e}: {o}")))
}

#[test]
fn daemon_pipeline_deploys_take_post_devs_as_direct_ones_do() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let packets = router_packets();
    let (vm, vm_routed) = vm_per_port(&packets);
    let bed = RouterBed::new();
    let s = Scratch::new("dmn-pipe");
    let run = s.dir.join("run");
    let all = [IN, OUT[0], OUT[1]];

    // Directly, as pipeline_deploy.rs does: the reference output.
    let direct = deploy(&s, &run, "off", &bed, &all);
    assert_eq!(posts(&s, &run, "off"), all);
    let (code, o, e) = nfkit(&s, &run, "off", &["undeploy", "--dev", IN]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(posts(&s, &run, "off").is_empty());

    let cfg = daemon_cli::write_config(&s, &run, "");
    let (code, o, e) = nfkit(
        &s,
        &run,
        "",
        &["daemon", "start", "--config", cfg.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{o}{e}");
    let _stop = daemon_cli::Stopper::new(&s, &run, "");
    let sock = run.join("nfkitd.sock").display().to_string();

    let via = deploy(&s, &run, &sock, &bed, &all);
    assert_eq!(via, direct, "through nfkitd vs directly");
    let mut devs: Vec<&str> = via["posts"]
        .as_array()
        .expect("posts")
        .iter()
        .map(|p| p["dev"].as_str().unwrap_or(""))
        .collect();
    devs.sort();
    assert_eq!(devs, all, "every device: {via}");
    assert_eq!(posts(&s, &run, &sock), all);

    // The same result: frames per port are the VM's, post ran on each.
    let got = bed.send_and_capture(&packets);
    assert_eq!(got[0], vm[0], "port 2: the kernel's frames are the VM's");
    assert_eq!(got[1], vm[1], "port 3: the kernel's frames are the VM's");
    let (code, o, e) = nfkit(&s, &run, &sock, &["map", "get", "stats", "3", "--dev", IN]);
    assert_eq!(code, 0, "{o}{e}");
    assert_eq!(
        o.trim(),
        vm_routed.to_string(),
        "post ran on every routed frame"
    );

    // A redeploy through nfkitd with two devices detaches the third; the
    // daemon's audit has both deploys.
    let v = deploy(&s, &run, &sock, &bed, &OUT);
    assert_eq!(v["posts"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(posts(&s, &run, &sock), OUT);
    let (code, o, e) = nfkit(&s, &run, &sock, &["undeploy", "--dev", IN]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(posts(&s, &run, &sock).is_empty());
    let audit = std::fs::read_to_string(s.dir.join("data/audit.log")).unwrap();
    let deploys = audit
        .lines()
        .filter(|l| l.contains("DeploymentService/Deploy\"") && l.contains("\"result\":\"ok\""))
        .count();
    assert_eq!(deploys, 2, "{audit}");

    // A repeated device and an object with post devices are refused.
    let script = examples().join("router.py").display().to_string();
    let (code, _, e) = nfkit(
        &s,
        &run,
        &sock,
        &deploy_args(&script, &bed, &[OUT[0], OUT[0]]),
    );
    assert_eq!(code, 1);
    assert!(e.contains("post_devs") && e.contains("named twice"), "{e}");
    assert!(posts(&s, &run, &sock).is_empty());
}
