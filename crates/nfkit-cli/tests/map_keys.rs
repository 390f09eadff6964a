//! `nfkit map get/set/delete/dump` on a deployed chain follow one
//! convention with the chain (docs/abi.md "Map keys and values"): an
//! address given for a `u32` key means its value as `Packet.read_u32`
//! gives it, so the key the chain wrote is found by its address; a
//! missing key is `no such key KEY`, once, exit code 1; an NF set shows
//! addresses and expiry times. Needs root; skipped otherwise. The
//! namespaces, the veth and the bpffs mount are removed by RAII guards
//! even when an assertion fails.

mod common;
use common::{is_root, json, nfkit_cmd, nfkit_ok, Pair, Scratch};
use nfkit_kernel::testbed::Netns;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
from nf.classify import every_packet
from nf.sets import src_set, SET_ADD

seen = HashMap(u32, u64, 1024)
pairs = HashMap((u32, u32), u64, 1024)

def count() -> u64:
    if Packet.ip_version != 4:
        return PASS
    seen[Packet.read_u32(26)] += 1
    pairs[(Packet.read_u32(26), Packet.read_u32(30))] += 1
    src_set(SET_ADD, 30_000_000_000)
    return PASS

every_packet(count)
"#;

/// Sends `count` UDP frames from `src` to NET.1 on `dev` inside `ns`.
fn send(ns: &Netns, dev: &str, src: Ipv4Addr, count: u64) {
    let frame = common::udp_frame(src, Ipv4Addr::new(198, 18, 51, 1), 4000);
    common::send_frames(ns, dev, frame, count);
}

/// `nfkit ARGS` in `ns`: (exit code, stdout, stderr).
fn nfkit_code(ns: &Netns, s: &Scratch, args: &[&str]) -> (Option<i32>, String, String) {
    let o = nfkit_cmd(Some(ns), s)
        .args(args)
        .output()
        .expect("run nfkit");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `nfkit map get MAP KEY` once it gives `want` (frames take a moment).
fn wait_for(ns: &Netns, s: &Scratch, map: &str, key: &str, want: &str) {
    let t0 = Instant::now();
    loop {
        let (code, out, err) = nfkit_code(ns, s, &["map", "get", map, key]);
        if code == Some(0) && out.trim() == want {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "map get {map} {key}: want {want}, got {code:?} {out} {err}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn addresses_find_what_the_chain_wrote() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("map-keys");
    let Pair { sut, peer, veth } = Pair::new("mk-sut", "mk-peer", "198.18.51");
    let dev = veth.a.dev.as_str();
    std::fs::create_dir_all(s.state()).expect("state dir");
    let script = s.state().join("seen.py");
    std::fs::write(&script, SCRIPT).expect("script");
    let script = script.to_str().expect("utf-8");
    nfkit_ok(
        &sut,
        &s,
        &["deploy", script, "--dev", dev, "--hook", "xdp-generic"],
    );

    // The chain writes seen[0xC6123307] for 198.18.51.7; the address finds it.
    let src = Ipv4Addr::new(198, 18, 51, 7);
    send(&peer, &veth.b.dev, src, 3);
    wait_for(&sut, &s, "seen", "198.18.51.7", "3");
    wait_for(&sut, &s, "seen", &u32::from(src).to_string(), "3");
    wait_for(&sut, &s, "pairs", "(198.18.51.7, 198.18.51.1)", "3");
    let dump = json(&nfkit_ok(&sut, &s, &["map", "dump", "pairs", "--json"]));
    assert_eq!(
        dump[0]["key"],
        serde_json::json!([u32::from(src), 0xC612_3301u32]),
        "{dump}"
    );

    // A missing key: said once, no OS error, exit code 1.
    for op in ["delete", "get"] {
        let (code, out, err) = nfkit_code(&sut, &s, &["map", op, "seen", "198.18.99.99"]);
        assert_eq!(code, Some(1), "{op}: {out}{err}");
        assert_eq!(err, "error: map `seen`: no such key 198.18.99.99\n", "{op}");
    }

    // set by address, then the chain adds to the same entry.
    let other = Ipv4Addr::new(198, 18, 51, 8);
    nfkit_ok(&sut, &s, &["map", "set", "seen", "198.18.51.8", "100"]);
    send(&peer, &veth.b.dev, other, 2);
    wait_for(&sut, &s, "seen", "198.18.51.8", "102");
    nfkit_ok(&sut, &s, &["map", "delete", "seen", "198.18.51.8"]);
    let (code, _, err) = nfkit_code(&sut, &s, &["map", "get", "seen", "198.18.51.8"]);
    assert_eq!(
        (code, err.as_str()),
        (Some(1), "error: map `seen`: no such key 198.18.51.8\n")
    );

    // The NF's set: addresses and expiry times, not 64 hex characters.
    let text = nfkit_ok(&sut, &s, &["map", "dump", "nf_sets_src"]);
    assert!(text.contains("198.18.51.7: expires in "), "{text}");
    assert!(text.contains("198.18.51.8: expires in "), "{text}");
    let dump = json(&nfkit_ok(
        &sut,
        &s,
        &["map", "dump", "nf_sets_src", "--json"],
    ));
    let row = dump
        .as_array()
        .and_then(|a| a.iter().find(|r| r["key"] == "198.18.51.7"))
        .unwrap_or_else(|| panic!("{dump}"));
    let in_s = row["value"]["in_s"].as_f64().expect("in_s");
    assert!(in_s > 20.0 && in_s <= 30.0, "{row}");
    // The state file recorded the types: `map list` shows them.
    let list = json(&nfkit_ok(&sut, &s, &["map", "list", "--json"]));
    let row = |n: &str| {
        list.as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == n))
            .cloned()
            .unwrap_or_else(|| panic!("{n}: {list}"))
    };
    assert_eq!(row("seen")["key"]["kind"], "int", "{list}");
    assert_eq!(row("pairs")["key"]["kind"], "tuple", "{list}");
    assert_eq!(row("nf_sets_src")["value"]["kind"], "time", "{list}");
    let got = nfkit_ok(&sut, &s, &["map", "get", "nf_sets_src", "198.18.51.7"]);
    assert!(got.starts_with("expires in "), "{got}");
    nfkit_ok(&sut, &s, &["undeploy"]);
}
