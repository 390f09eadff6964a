//! `nfkit send` and `nfkit recv` as processes: flow fields (ToS/DSCP,
//! TTL, payload patterns) in the frames `send --write` renders; on a veth
//! pair (root; skipped otherwise): the rate achieved against the target
//! and its warning, `recv --seq-log`, and a clean stop with a report on
//! SIGINT; the engines (`send --engine live|packet|auto`, `recv --engine
//! xdp|packet`): the live engine's frames are `--write`'s, a veth peer
//! without XDP is refused (auto: packet), the XDP receiver's report is
//! the packet one's, a live sender reaches the packet receiver. Namespaces and the veth are removed by RAII guards, the
//! processes killed, even when an assertion fails.

mod common;
use common::{is_root, json, Pair, NFKIT};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A scratch directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("nfkit-tt-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nfkit(args: &[&str]) -> Output {
    Command::new(NFKIT).args(args).output().expect("run nfkit")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn flow_tos_dscp_ttl_and_payload_reach_the_frames() {
    let dir = TempDir::new("write");
    let pcap = dir.0.join("f.pcap");
    let p = pcap.to_str().expect("utf-8 path");
    let out = nfkit(&[
        "send",
        "--write",
        p,
        "--count",
        "3",
        "--seq",
        "--stream",
        "9",
        "--flows",
        "src=198.18.0.1,dst=198.18.0.2,tos=0xb8,ttl=9,len=24,payload=text:GET /;\
         src=2001:db8::1,dst=2001:db8::2,dscp=10,ttl=3,len=18,payload=hex:deadbeef;\
         proto=tcp,src=198.18.0.1,dst=198.18.0.2,dscp=63,len=16,payload=hex:01",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pk = nfkit_pcap::read_file(&pcap).expect("pcap");
    assert_eq!(pk.len(), 3);
    // IPv4/UDP: ToS, TTL; the stamp takes payload bytes 0-15, the
    // pattern shows from byte 16 on.
    let f = &pk[0].data;
    assert_eq!((f[15], f[22]), (0xb8, 9));
    let payload = &f[14 + 20 + 8..];
    assert_eq!(&payload[..4], b"NFKQ");
    assert_eq!(&payload[16..], b"GET /GET /GET /GET /GET "[16..].as_ref());
    // IPv6/UDP: traffic class 40, hop limit 3; bytes 16-17 of the pattern.
    let f = &pk[1].data;
    assert_eq!(((f[14] & 0x0f) << 4 | f[15] >> 4, f[21]), (40, 3));
    assert_eq!(&f[14 + 40 + 8..][..4], b"NFKQ");
    assert_eq!(&f[14 + 40 + 8 + 16..], b"\xde\xad");
    // IPv4/TCP (not stamped): ToS 0xfc, default TTL 64, payload 01 x16.
    let f = &pk[2].data;
    assert_eq!((f[15], f[22]), (0xfc, 64));
    assert_eq!(&f[14 + 20 + 20..], &[1u8; 16][..]);

    for (spec, needles) in [
        ("dscp=64", &["flow spec 2", "dscp=`64`"][..]),
        ("tos=1,dscp=1", &["flow spec 2", "tos=", "dscp="]),
        ("payload=hex:xyz", &["flow spec 2", "payload="]),
    ] {
        let flows = format!("src=198.18.0.1,dst=198.18.0.2;src=198.18.0.1,dst=198.18.0.2,{spec}");
        let out = nfkit(&["send", "--write", p, "--flows", &flows]);
        assert!(!out.status.success(), "{spec}");
        let err = text(&out.stderr);
        for n in needles {
            assert!(err.contains(n), "{spec}: `{n}` not in {err}");
        }
    }
}

/// A running `nfkit` whose stdout lines arrive on a channel; killed on
/// drop if still running.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<std::process::ChildStderr>,
}

impl Running {
    fn spawn(args: &[&str]) -> Running {
        let mut child = Command::new(NFKIT)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nfkit");
        let out = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            stderr,
        }
    }

    /// The next JSON line of stdout (panics after `wait` without one).
    fn next_json(&self, wait: Duration) -> Value {
        let line = self
            .lines
            .recv_timeout(wait)
            .unwrap_or_else(|e| panic!("no line from nfkit in {wait:?}: {e}"));
        json(&line)
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig}");
    }

    /// Waits (at most `limit`, generous) for the exit; (success, the
    /// remaining stdout lines, stderr).
    fn finish(mut self, limit: Duration) -> (bool, Vec<String>, String) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            assert!(
                t0.elapsed() < limit,
                "nfkit still running {limit:?} after being asked to stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let mut lines = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            lines.push(l);
        }
        (status.success(), lines, err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `nfkit recv --every 0.1 --json` on the pair's peer end: returned once
/// its first running total is out (its socket is bound and its signal
/// handler installed by then).
fn start_recv(pair: &Pair, extra: &[&str]) -> Running {
    let mut args = vec![
        "recv",
        "--netns",
        pair.peer.name(),
        "--dev",
        &pair.veth.b.dev,
        "--duration",
        "30",
        "--every",
        "0.1",
        "--json",
    ];
    args.extend_from_slice(extra);
    let rx = Running::spawn(&args);
    let first = rx.next_json(Duration::from_secs(10));
    assert_eq!(first["final"], false, "{first}");
    rx
}

/// The args of `nfkit send` from the pair's `sut` end to its peer.
fn send_args<'a>(pair: &'a Pair, flows: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "send",
        "--netns",
        pair.sut.name(),
        "--dev",
        &pair.veth.a.dev,
        "--flows",
        flows,
        "--json",
    ];
    a.extend_from_slice(more);
    a
}

/// The final report among recv's lines.
fn final_report(lines: &[String]) -> Value {
    let last = lines
        .last()
        .unwrap_or_else(|| panic!("no report: {lines:?}"));
    let v = json(last);
    assert_eq!(v["final"], true, "{last}");
    v
}

#[test]
fn send_meets_its_rate_and_recv_logs_every_sequence_number() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    const RATE: u64 = 20_000;
    const N: u64 = 20_000;
    let dir = TempDir::new("seqlog");
    let log = dir.0.join("seq.log");
    let pair = Pair::new("tt-tx", "tt-rx", "198.18.31");
    let rx = start_recv(&pair, &["--seq-log", log.to_str().expect("utf-8 path")]);
    let flows = "src=198.18.31.1,dst=198.18.31.2,sport=4000,dport=4001,len=32,dscp=46";
    let (rate, count) = (RATE.to_string(), N.to_string());
    let args = send_args(
        &pair,
        flows,
        &[
            "--rate", &rate, "--count", &count, "--seq", "--stream", "77",
        ],
    );
    let out = nfkit(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let sent = json(&text(&out.stdout));
    assert_eq!(sent["sent"], N, "{sent}");
    assert_eq!(sent["stamped"], N, "{sent}");
    assert_eq!(sent["target_pps"].as_f64(), Some(RATE as f64), "{sent}");
    assert_eq!(sent["interrupted"], false, "{sent}");
    // Pacing is the feature: the reported rate is within 5 % of the
    // target, and then there is no warning.
    let achieved = sent["achieved_pps"].as_f64().expect("achieved_pps");
    assert!(
        achieved >= 0.95 * RATE as f64 && achieved <= 1.05 * RATE as f64,
        "achieved {achieved} pps for a target of {RATE}: {sent}"
    );
    assert!(!err.contains("warning"), "{err}");

    // Let the last frames arrive, then stop the receiver (SIGINT).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let v = rx.next_json(Duration::from_secs(5));
        if v["by_source"]["198.18.31.1"].as_u64() >= Some(N) {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    rx.signal("-INT");
    let (ok, lines, err) = rx.finish(Duration::from_secs(10));
    assert!(ok, "{err}");
    let report = final_report(&lines);
    assert_eq!(report["interrupted"], true, "{report}");
    let streams = report["streams"].as_array().expect("streams");
    let s = streams
        .iter()
        .find(|s| s["stream"] == 77)
        .unwrap_or_else(|| panic!("no stream 77: {report}"));

    // The log: a '#' header, then "77 SEQ" per stamped frame received.
    let logged = std::fs::read_to_string(&log).expect("seq log");
    let mut lines = logged.lines();
    assert!(
        lines.next().is_some_and(|h| h.starts_with('#')),
        "{logged:.200}"
    );
    let seqs: Vec<u64> = lines
        .map(|l| {
            let (stream, n) = l.split_once(' ').unwrap_or_else(|| panic!("line `{l}`"));
            assert_eq!(stream, "77", "line `{l}`");
            n.parse().unwrap_or_else(|_| panic!("line `{l}`"))
        })
        .collect();
    let distinct: std::collections::BTreeSet<u64> = seqs.iter().copied().collect();
    let num = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    assert_eq!(distinct.len() as u64, num("received"), "{s}");
    assert_eq!(
        seqs.len() as u64,
        num("received") + num("duplicates"),
        "{s}"
    );
    assert_eq!(distinct.last().copied(), Some(num("highest")), "{s}");
    assert!(num("highest") < N, "{s}");
    // A veth pair loses and reorders nothing here: 0..N in order.
    assert_eq!(seqs, (0..N).collect::<Vec<u64>>(), "{s}");
}

#[test]
fn an_unreachable_rate_is_reported_with_a_warning() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let pair = Pair::new("tt-fast", "tt-sink", "198.18.32");
    let flows = "src=198.18.32.1,dst=198.18.32.2,len=32";
    let args = send_args(&pair, flows, &["--rate", "50000000", "--count", "200000"]);
    let out = nfkit(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r = json(&text(&out.stdout));
    assert_eq!(r["sent"], 200_000, "{r}");
    assert_eq!(r["target_pps"].as_f64(), Some(5e7), "{r}");
    let achieved = r["achieved_pps"].as_f64().expect("achieved_pps");
    assert!(achieved > 0.0 && achieved < 0.95 * 5e7, "{r}");
    assert!(
        err.contains("warning: sent at ") && err.contains("% under the target 50000000 pps"),
        "{err}"
    );
    // The text report carries both rates too.
    let args: Vec<&str> = send_args(&pair, flows, &["--rate", "50000000", "--count", "1000"])
        .into_iter()
        .filter(|a| *a != "--json")
        .collect();
    let out = nfkit(&args);
    assert!(out.status.success());
    let t = text(&out.stdout);
    assert!(
        t.contains("frames/s") && t.contains("target 50000000"),
        "{t}"
    );
    assert!(text(&out.stderr).contains("warning: sent at "));
}

#[test]
fn sigint_stops_send_and_recv_with_their_reports() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let pair = Pair::new("tt-int", "tt-intrx", "198.18.33");
    let rx = start_recv(&pair, &[]);
    let flows = "src=198.18.33.1,dst=198.18.33.2,len=32";
    let tx = Running::spawn(&send_args(
        &pair,
        flows,
        &["--rate", "2000", "--duration", "30", "--seq"],
    ));
    // Sending has begun (its handler is installed before) once recv counts frames.
    let t0 = Instant::now();
    loop {
        let v = rx.next_json(Duration::from_secs(10));
        if v["frames"].as_u64() > Some(0) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no frames: {v}");
    }
    tx.signal("-INT");
    let (ok, lines, err) = tx.finish(Duration::from_secs(10));
    assert!(ok, "send: {err}");
    let sent = json(
        lines
            .last()
            .unwrap_or_else(|| panic!("no send report: {err}")),
    );
    assert_eq!(sent["interrupted"], true, "{sent}");
    let n = sent["sent"].as_u64().expect("sent");
    assert!(n > 0 && n < 2000 * 30, "{sent}");
    assert_eq!(sent["stamped"], n, "{sent}");

    rx.signal("-INT");
    let (ok, lines, err) = rx.finish(Duration::from_secs(10));
    assert!(ok, "recv: {err}");
    let report = final_report(&lines);
    assert_eq!(report["interrupted"], true, "{report}");
    assert!(report["frames"].as_u64() > Some(0), "{report}");
    assert!(report["seconds"].as_f64() < Some(30.0), "{report}");

    // SIGTERM too, on a recv that has seen nothing.
    let rx = start_recv(&pair, &[]);
    rx.signal("-TERM");
    let (ok, lines, err) = rx.finish(Duration::from_secs(10));
    assert!(ok, "recv: {err}");
    assert_eq!(final_report(&lines)["interrupted"], true);
}

#[test]
fn send_live_refuses_a_veth_peer_without_xdp_and_auto_falls_back() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let pair = Pair::new("tt-lv", "tt-lvrx", "198.18.34");
    let flows = "src=198.18.34.1,dst=198.18.34.2,len=32";
    let out = nfkit(&send_args(
        &pair,
        flows,
        &["--engine", "live", "--count", "10"],
    ));
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for needle in [
        pair.veth.b.dev.as_str(),
        pair.peer.name(),
        "no XDP program",
        "--engine packet",
        "nfkit recv --engine xdp",
    ] {
        assert!(err.contains(needle), "`{needle}` not in: {err}");
    }
    // The default engine (auto) says why and sends with the packet engine.
    let out = nfkit(&send_args(&pair, flows, &["--count", "10"]));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r = json(&text(&out.stdout));
    assert_eq!(
        (r["sent"].as_u64(), r["engine"].as_str()),
        (Some(10), Some("packet")),
        "{r}"
    );
    assert!(
        err.contains("note:") && err.contains("packet engine"),
        "{err}"
    );
    let out = nfkit(&send_args(
        &pair,
        flows,
        &["--engine", "packet", "--count", "10"],
    ));
    assert!(out.status.success());
    assert_eq!(json(&text(&out.stdout))["engine"], "packet");
}

#[test]
fn live_sender_into_the_xdp_receiver_reports_like_the_packet_engine() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    const N: u64 = 100_000;
    let dir = TempDir::new("xdplog");
    let log = dir.0.join("seq.log");
    let pair = Pair::new("tt-x", "tt-xrx", "198.18.35");
    let rx = start_recv(
        &pair,
        &[
            "--engine",
            "xdp",
            "--seq-log",
            log.to_str().expect("utf-8 path"),
        ],
    );
    let flows = "src=198.18.35.1,dst=198.18.35.2,len=32";
    let count = N.to_string();
    let out = nfkit(&send_args(
        &pair,
        flows,
        &[
            "--engine", "live", "--count", &count, "--seq", "--stream", "78",
        ],
    ));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let sent = json(&text(&out.stdout));
    assert_eq!(sent["engine"], "live", "{sent}");
    assert_eq!(sent["sent"], N, "{sent}");
    assert_eq!(sent["stamped"], N, "{sent}");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let v = rx.next_json(Duration::from_secs(5));
        if v["frames"].as_u64() >= Some(N) {
            break;
        }
    }
    rx.signal("-INT");
    let (ok, lines, err) = rx.finish(Duration::from_secs(10));
    assert!(ok, "{err}");
    let report = final_report(&lines);
    assert_eq!(report["engine"], "xdp", "{report}");
    for key in [
        "frames",
        "bytes",
        "by_source",
        "unstamped",
        "streams",
        "seconds",
        "rate_pps",
        "final",
        "interrupted",
    ] {
        assert!(report.get(key).is_some(), "no `{key}`: {report}");
    }
    assert!(report["rate_pps"].as_f64() > Some(0.0), "{report}");
    let s = report["streams"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["stream"] == 78))
        .unwrap_or_else(|| panic!("no stream 78: {report}"));
    let num = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    // At full speed on a loaded machine the receiver may lose frames
    // (its NAPI then runs late); every frame is still accounted for.
    assert_eq!(
        report["by_source"]["198.18.35.1"],
        num("received"),
        "{report}"
    );
    assert!(num("highest") < N, "{s}");
    assert_eq!(num("received") + num("missing"), num("highest") + 1, "{s}");
    assert!(num("received") >= N * 95 / 100, "{s}");
    assert_eq!(
        (num("duplicates"), num("reordered"), num("out_of_range")),
        (0, 0, 0),
        "{s}"
    );
    let logged = std::fs::read_to_string(&log).expect("seq log");
    let mut lines = logged.lines();
    assert!(lines.next().is_some_and(|h| h.starts_with('#')));
    let seqs: Vec<u64> = lines
        .map(|l| {
            let (stream, n) = l.split_once(' ').unwrap_or_else(|| panic!("line `{l}`"));
            assert_eq!(stream, "78", "line `{l}`");
            n.parse().unwrap_or_else(|_| panic!("line `{l}`"))
        })
        .collect();
    // The log: every stamp received, in order.
    assert_eq!(seqs.len() as u64, num("received"));
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "out of order");
    assert_eq!(seqs.last().copied(), Some(num("highest")));
    // recv detached its program on exit.
    let link = pair
        .peer
        .ip(&["-j", "link", "show", "dev", &pair.veth.b.dev])
        .expect("ip link");
    assert!(!link.contains("\"xdp\""), "{link}");
}

#[test]
fn recv_packet_lets_a_live_sender_in_and_every_frame_is_accounted_for() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    const N: u64 = 200_000;
    let pair = Pair::new("tt-lp", "tt-lprx", "198.18.36");
    let rx = start_recv(&pair, &["--engine", "packet"]);
    // While it runs, the packet receiver's veth has a pass-all XDP program.
    let link = pair
        .peer
        .ip(&["-j", "link", "show", "dev", &pair.veth.b.dev])
        .expect("ip link");
    assert!(link.contains("nfkit_pass"), "{link}");
    let flows = "src=198.18.36.1,dst=198.18.36.2,len=32";
    let count = N.to_string();
    let out = nfkit(&send_args(
        &pair,
        flows,
        &[
            "--engine", "live", "--rate", "200000", "--count", &count, "--seq", "--stream", "79",
        ],
    ));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let sent = json(&text(&out.stdout));
    assert_eq!(
        (&sent["engine"], &sent["sent"]),
        (&Value::from("live"), &Value::from(N))
    );
    std::thread::sleep(Duration::from_millis(500));
    rx.signal("-INT");
    let (ok, lines, err) = rx.finish(Duration::from_secs(10));
    assert!(ok, "{err}");
    let report = final_report(&lines);
    assert_eq!(report["engine"], "packet", "{report}");
    assert!(report["rate_pps"].as_f64() > Some(0.0), "{report}");
    let s = report["streams"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["stream"] == 79))
        .unwrap_or_else(|| panic!("no stream 79: {report}"));
    let num = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    // Received, missing below the highest, lost after it: N in all.
    assert!(num("highest") < N, "{s}");
    assert_eq!(
        num("received") + num("missing") + (N - 1 - num("highest")),
        N,
        "{s}"
    );
    assert_eq!(num("received") + num("missing"), num("highest") + 1, "{s}");
    assert_eq!(num("duplicates"), 0, "{s}");
    assert!(num("received") > 0, "{s}");
    let link = pair
        .peer
        .ip(&["-j", "link", "show", "dev", &pair.veth.b.dev])
        .expect("ip link");
    assert!(!link.contains("\"xdp\""), "{link}");
}

#[test]
fn send_engine_live_sends_the_frames_send_write_writes() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = TempDir::new("livewrite");
    let pcap = dir.0.join("w.pcap");
    let p = pcap.to_str().expect("utf-8 path");
    let pair = Pair::new("tt-lw", "tt-lwrx", "198.18.37");
    // Every field kind: addresses of both families, ports, ToS and DSCP,
    // TTL, lengths, payload patterns, TCP flags, MACs, weights.
    let flows = "smac=02:00:00:00:00:0b,src=198.18.37.1,dst=198.18.37.2,sport=1000,dport=53,tos=0xb8,ttl=9,len=24,payload=text:GET /,weight=2;\
         smac=02:00:00:00:00:0b,dmac=02:00:00:00:00:0c,src=2001:db8::1,dst=2001:db8::2,dscp=10,ttl=3,len=300,payload=hex:deadbeef;\
         smac=02:00:00:00:00:0b,proto=tcp,flags=synack,src=198.18.37.1,dst=198.18.37.2,sport=80,dport=4000,dscp=63,len=16,payload=hex:01";
    let common = ["--count", "12", "--seq", "--stream", "6", "--flows", flows];
    let mut write = vec!["send", "--write", p];
    write.extend_from_slice(&common);
    let out = nfkit(&write);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let want: Vec<Vec<u8>> = nfkit_pcap::read_file(&pcap)
        .expect("pcap")
        .into_iter()
        .map(|p| p.data)
        .collect();
    assert_eq!(want.len(), 12);

    let _pass =
        nfkit_traffic::xdp::attach_pass(&pair.veth.b.dev, Some(pair.peer.name())).expect("pass");
    let cap = nfkit_traffic::Capture::start(&pair.veth.b.dev, Some(pair.peer.name()), 1000)
        .expect("capture");
    let mut args = vec![
        "send",
        "--netns",
        pair.sut.name(),
        "--dev",
        &pair.veth.a.dev,
        "--engine",
        "live",
        "--json",
    ];
    args.extend_from_slice(&common);
    let out = nfkit(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(json(&text(&out.stdout))["engine"], "live");
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<Vec<u8>> = cap
        .finish()
        .expect("capture")
        .into_iter()
        .filter(|f| f.get(6..12) == Some(&[2u8, 0, 0, 0, 0, 0x0b][..]))
        .collect();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i}");
    }
}
