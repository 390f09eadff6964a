//! Issue 16's testbed acceptance for `nfkit switch run` on live ports
//! (root; skipped otherwise): "On a namespace veth testbed: the DDoS demo
//! scenario through the switch with the same outcome as in the kernel
//! (legitimate traffic delivered, flooders blacklisted); 1000 reloads
//! under numbered traffic lose no frame that both versions pass."
//!
//! Testbed: three namespaces, sender -> DUT -> receiver, joined by two
//! veth pairs in 198.18.0.0/15. The switch runs in the DUT namespace
//! (`ip netns exec`, 2 workers) with the DUT's two veth ends as
//! AF_PACKET ports 1 and 2 (host port: 2), its control socket in a
//! private `NFKIT_RUN_DIR`. `nfkit send --engine packet` sends numbered frames
//! (`--seq --stream`) from the sender; `nfkit recv --engine packet
//! --json` counts them per stream at the receiver.
//!
//! * Reloads (on AF_PACKET ports, and again on AF_XDP ports): two
//!   pass-through versions (both `REDIRECT(2)`, each
//!   bumping its own slot of a shared `seen` map) alternate through 1000
//!   reloads on the control socket (one JSON request per connection, as
//!   `nfkit switch reload` does, without 1000 process starts) while
//!   20 kpps of numbered UDP flow; every frame sent arrives exactly
//!   once, both versions counted, the status says 1000 reloads, 0
//!   failures.
//! * DDoS (AF_PACKET ports, and again AF_XDP): `examples/ddos.py` with scripts/demo.sh's traffic (three
//!   legitimate sources at 15 pps each towards one destination, two
//!   flooding sources at 500 pps each meanwhile): the legitimate stream
//!   arrives in full, the flood mostly not (< 20 %), the blacklist
//!   (`nf_sets_src`) holds both flooders and no one else, and the chain
//!   dropped most of the flood. The outcome is compared with what
//!   scripts/demo.sh shows in the kernel, not with a kernel run here.
//!
//! * Updates: the switch started with a key file and a UDP update
//!   listener on the DUT's address; under 20 kpps of numbered UDP, a
//!   signed update applies, then 10,008 hostile updates (random bytes,
//!   wrong keys, flipped bits, truncated, replayed, old versions, wrong
//!   target, unsigned) sent over UDP from the sender's namespace are
//!   all refused with their reason, and a valid update sent over UDP from the sender's
//!   namespace applies afterwards; every frame sent arrives exactly
//!   once, the status counts every refusal per reason.
//!
//! No timed assertions: counts only. Namespaces and veths are removed
//! by RAII guards, the switch and the traffic tools killed, even when an
//! assertion fails; on success the switch is stopped with `nfkit switch
//! stop`.

mod common;
use common::{examples, is_root, json, Dir, NFKIT};
use nfkit_kernel::testbed::{Netns, Veth};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// sender --left-- DUT --right-- receiver. Fields drop in order: the
/// veth pairs, then the namespaces.
struct Bed {
    left: Veth,
    right: Veth,
    sender: Netns,
    dut: Netns,
    receiver: Netns,
    /// `198.18.X` of the right pair (the receiver is `.2`).
    right_net: String,
    left_net: String,
}

impl Bed {
    fn new(tag: &str, left_net: &str, right_net: &str) -> Bed {
        let sender = Netns::new(&format!("{tag}-snd")).expect("netns");
        let dut = Netns::new(&format!("{tag}-dut")).expect("netns");
        let receiver = Netns::new(&format!("{tag}-rcv")).expect("netns");
        for ns in [&sender, &dut, &receiver] {
            // No IPv6 chatter (router solicitations...) on the links.
            ns.exec(&[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .expect("sysctl");
        }
        let left = Veth::new(
            Some(&sender),
            Some(&format!("{left_net}.1/24")),
            Some(&dut),
            Some(&format!("{left_net}.254/24")),
        )
        .expect("veth sender-DUT");
        let right = Veth::new(
            Some(&dut),
            Some(&format!("{right_net}.254/24")),
            Some(&receiver),
            Some(&format!("{right_net}.2/24")),
        )
        .expect("veth DUT-receiver");
        Bed {
            left,
            right,
            sender,
            dut,
            receiver,
            right_net: right_net.to_string(),
            left_net: left_net.to_string(),
        }
    }
}

/// A child process killed (and reaped) on drop if still running.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Proc {
    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.0.id().to_string()])
            .status();
    }

    /// Waits for the exit; (success, stdout, stderr).
    fn finish(mut self) -> (bool, String, String) {
        let child = std::mem::replace(&mut self.0, Command::new("true").spawn().expect("true"));
        let out = child.wait_with_output().expect("wait");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The switch: `ip netns exec DUT nfkit switch run` with a private run
/// directory.
struct Switch {
    proc: Option<Proc>,
    name: String,
    run_dir: String,
    /// Its standard error (a file: a switch logging many refusals must
    /// not block on a pipe nobody reads until the end).
    err_path: String,
}

impl Switch {
    /// Starts the switch on AF_PACKET ports with more `nfkit switch run` arguments.
    fn start_with(bed: &Bed, dir: &Dir, name: &str, script: &str, extra: &[&str]) -> Switch {
        Switch::start_on("afpacket", bed, dir, name, script, extra)
    }

    /// [`Switch::start_with`] on ports of `kind` (`afpacket`, `afxdp`).
    fn start_on(
        kind: &str,
        bed: &Bed,
        dir: &Dir,
        name: &str,
        script: &str,
        extra: &[&str],
    ) -> Switch {
        let run_dir = dir.path("run");
        let err_path = dir.path(&format!("{name}.stderr"));
        let p1 = format!("{}:{kind}", bed.left.b.dev);
        let p2 = format!("{}:{kind}", bed.right.a.dev);
        let child = Command::new("ip")
            .args(["netns", "exec", bed.dut.name(), NFKIT])
            .args([
                "switch",
                "run",
                "--name",
                name,
                "--port",
                &p1,
                "--port",
                &p2,
                "--host",
                "2",
                "--no-pin",
                "--workers",
                "2",
                "--json",
            ])
            .args(extra)
            .arg(script)
            .env("NFKIT_RUN_DIR", &run_dir)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err_path).expect("stderr file"))
            .spawn()
            .expect("start the switch");
        let mut sw = Switch {
            proc: Some(Proc(child)),
            name: name.to_string(),
            run_dir,
            err_path,
        };
        let sock = sw.socket();
        let t = Instant::now();
        while !std::path::Path::new(&sock).exists() {
            if let Some(p) = sw.proc.as_mut() {
                if let Ok(Some(st)) = p.0.try_wait() {
                    let (_, out, _) = sw.proc.take().expect("proc").finish();
                    panic!("the switch exited ({st}):\n{out}\n{}", sw.stderr());
                }
            }
            assert!(t.elapsed() < Duration::from_secs(30), "no control socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        sw
    }

    /// What it wrote to standard error so far.
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err_path).unwrap_or_default()
    }

    fn socket(&self) -> String {
        format!("{}/{}.sock", self.run_dir, self.name)
    }

    /// `nfkit switch ARGS` with the private run directory.
    fn cli(&self, args: &[&str]) -> String {
        let o = Command::new(NFKIT)
            .arg("switch")
            .args(args)
            .env("NFKIT_RUN_DIR", &self.run_dir)
            .output()
            .expect("run nfkit switch");
        assert!(
            o.status.success(),
            "nfkit switch {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn status(&self) -> Value {
        json(&self.cli(&["status", &self.name, "--json"]))
    }

    fn map(&self, map: &str) -> Value {
        json(&self.cli(&["map", &self.name, map, "--json"]))
    }

    /// One request on the control socket (one connection, one JSON line
    /// each way, as the CLI does).
    fn request(&self, req: &Value) -> Value {
        let s = UnixStream::connect(self.socket()).expect("connect to the control socket");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let mut w = &s;
        writeln!(w, "{req}").expect("write request");
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).expect("answer");
        json(&line)
    }

    /// `nfkit switch stop`, then the switch's final report.
    fn stop(mut self) -> Value {
        let text = self.cli(&["stop", &self.name]);
        assert!(text.contains("stopped"), "{text}");
        let (ok, out, _) = self.proc.take().expect("switch").finish();
        assert!(ok, "the switch failed:\n{out}\n{}", self.stderr());
        json(&out)
    }
}

/// `nfkit recv --json --every 0.1` at the receiver; its lines arrive on
/// a channel.
struct Recv {
    proc: Proc,
    lines: mpsc::Receiver<String>,
}

impl Recv {
    fn start(bed: &Bed) -> Recv {
        let mut child = Command::new(NFKIT)
            .args([
                "recv",
                "--netns",
                bed.receiver.name(),
                "--dev",
                &bed.right.b.dev,
                "--engine",
                "packet",
                "--duration",
                "120",
                "--every",
                "0.1",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nfkit recv");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let rx = Recv {
            proc: Proc(child),
            lines,
        };
        // Its first running total: the socket is bound.
        let first = rx.next(Duration::from_secs(10));
        assert_eq!(first["final"], false, "{first}");
        rx
    }

    fn next(&self, wait: Duration) -> Value {
        let l = self
            .lines
            .recv_timeout(wait)
            .unwrap_or_else(|e| panic!("nfkit recv said nothing: {e}"));
        json(&l)
    }

    /// Waits until stream `stream` has `n` frames, or until its count
    /// stayed put for 2 s (the assertions then say what is missing).
    fn wait_for(&self, stream: u64, n: u64) -> u64 {
        let (mut last, mut since) = (0, Instant::now());
        loop {
            let v = self.next(Duration::from_secs(10));
            let got = received(&v, stream);
            if got >= n {
                return got;
            }
            if got != last {
                (last, since) = (got, Instant::now());
            } else if since.elapsed() > Duration::from_secs(2) {
                return got;
            }
        }
    }

    /// Stops it (SIGINT) and gives its final report.
    fn finish(self) -> Value {
        self.proc.signal("-INT");
        let mut last = None;
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            match self.lines.recv_timeout(Duration::from_secs(10)) {
                Ok(l) => {
                    let v = json(&l);
                    if v["final"] == true {
                        last = Some(v);
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        let (_, _, err) = self.proc.finish();
        last.unwrap_or_else(|| panic!("no final report from nfkit recv: {err}"))
    }
}

/// Stream `stream`'s entry in a recv report (null when absent).
fn stream_of(v: &Value, stream: u64) -> Value {
    v["streams"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["stream"] == stream))
        .cloned()
        .unwrap_or(Value::Null)
}

fn received(v: &Value, stream: u64) -> u64 {
    stream_of(v, stream)["received"].as_u64().unwrap_or(0)
}

/// `nfkit send --engine packet` from the sender with `args` after the
/// common ones.
fn send_cmd(bed: &Bed, flows: &str, args: &[&str]) -> Command {
    let mut c = Command::new(NFKIT);
    c.args([
        "send",
        "--engine",
        "packet",
        "--netns",
        bed.sender.name(),
        "--dev",
        &bed.left.a.dev,
        "--flows",
        flows,
        "--json",
    ])
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

fn send_ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "nfkit send: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&String::from_utf8_lossy(&out.stdout))
}

/// The one UDP flow the switch tests send, left host to right host.
fn flows(bed: &Bed) -> String {
    format!(
        "src={l}.1,dst={r}.2,sport=7000,dport=7709,len=64",
        l = bed.left_net,
        r = bed.right_net
    )
}

/// 500 frames on stream 1 that must all arrive: the path works before
/// a counted run.
fn warm_up(bed: &Bed, rx: &Recv, flows: &str) {
    let warm = send_ok(
        send_cmd(
            bed,
            flows,
            &["--rate", "2000", "--count", "500", "--seq", "--stream", "1"],
        )
        .output()
        .expect("send"),
    );
    assert_eq!(warm["sent"], 500, "{warm}");
    assert_eq!(
        rx.wait_for(1, 500),
        500,
        "warm-up frames through the switch"
    );
}

/// Numbered traffic on stream 2 at RATE until stopped (at most 100 s),
/// once MARGIN frames have arrived.
fn numbered(bed: &Bed, rx: &Recv, flows: &str) -> Proc {
    let sender = Proc(
        send_cmd(
            bed,
            flows,
            &[
                "--rate", RATE, "--count", "2000000", "--seq", "--stream", "2",
            ],
        )
        .spawn()
        .expect("start the sender"),
    );
    assert!(rx.wait_for(2, MARGIN) >= MARGIN, "no numbered traffic");
    sender
}

/// A clean stream: every frame sent arrived once, nothing else.
fn assert_delivered(what: &str, report: &Value, stream: u64, sent: u64) {
    let s = stream_of(report, stream);
    assert_eq!(
        s["received"].as_u64(),
        Some(sent),
        "{what}: sent {sent}, {s}"
    );
    for k in ["missing", "duplicates", "out_of_range"] {
        assert_eq!(s[k].as_u64(), Some(0), "{what}: {k}: {s}");
    }
    assert_eq!(s["highest"].as_u64(), Some(sent - 1), "{what}: {s}");
}

fn pass_through(slot: u32) -> String {
    format!(
        "from nf.classify import every_packet\n\
         seen = ArrayMap(u64, 2)\n\
         def main() -> u64:\n    seen[{slot}] += 1\n    return REDIRECT(2)\n\
         every_packet(main)\n"
    )
}

/// Rows of `switch map --json` as (key, value) numbers.
fn map_numbers(rows: &Value) -> Vec<(u64, u64)> {
    let num = |v: &Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or_else(|| panic!("not a number: {v}"))
    };
    rows.as_array()
        .unwrap_or_else(|| panic!("rows: {rows}"))
        .iter()
        .map(|r| (num(&r["key"]), num(&r["value"])))
        .collect()
}

const RELOADS: usize = 1000;
const RATE: &str = "20000";
/// Numbered frames counted before the first and after the last reload.
const MARGIN: u64 = 2000;

#[test]
fn a_thousand_reloads_under_numbered_traffic_lose_no_frame() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    reloads_on("afpacket", "swvr", ("198.18.50", "198.18.51"));
}

/// The same through AF_XDP ports (copy mode on veth; the switch installs
/// its XDP redirect program and XSK map on both veths, and removes them).
#[test]
fn a_thousand_reloads_through_afxdp_ports_lose_no_frame() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    reloads_on("afxdp", "swxr", ("198.18.56", "198.18.57"));
}

/// 1000 reloads under numbered traffic through ports of `kind`.
fn reloads_on(kind: &str, tag: &str, nets: (&str, &str)) {
    let t0 = Instant::now();
    let dir = Dir::new(&format!("{tag}-reload"));
    let bed = Bed::new(tag, nets.0, nets.1);
    let v = [dir.path("v1.py"), dir.path("v2.py")];
    std::fs::write(&v[0], pass_through(0)).expect("v1");
    std::fs::write(&v[1], pass_through(1)).expect("v2");
    let sw = Switch::start_on(kind, &bed, &dir, tag, &v[0], &[]);
    let rx = Recv::start(&bed);
    let flows = flows(&bed);

    // Warm-up: the path works before the counted run.
    warm_up(&bed, &rx, &flows);

    // The numbered run: the sender runs until stopped (at most 100 s).
    let sender = numbered(&bed, &rx, &flows);
    let mut failed = Vec::new();
    for i in 0..RELOADS {
        // v2, v1, v2, ...
        let script = &v[(i + 1) % 2];
        let a = sw.request(&json!({"op": "reload", "script": script}));
        if a["ok"] != true {
            failed.push(a);
        }
    }
    assert!(failed.is_empty(), "refused reloads: {failed:?}");
    let after = sw.status();
    let at_last = stream_of(&rx.next(Duration::from_secs(10)), 2)["received"]
        .as_u64()
        .unwrap_or(0);
    rx.wait_for(2, at_last + MARGIN);
    sender.signal("-INT");
    let (_, out, err) = sender.finish();
    let sent_report = json(&out);
    assert_eq!(sent_report["interrupted"], true, "{sent_report} {err}");
    let sent = sent_report["sent"].as_u64().expect("sent");
    assert_eq!(sent_report["stamped"].as_u64(), Some(sent), "{sent_report}");
    assert!(sent < 2_000_000, "the sender ran out during the reloads");
    rx.wait_for(2, sent);
    let report = rx.finish();
    assert_delivered("reload run", &report, 2, sent);
    assert_delivered("warm-up", &report, 1, 500);

    // The switch: 1000 reloads done, none refused; both versions
    // counted every frame between them (the map is kept by name).
    assert_eq!(after["reloads"].as_u64(), Some(RELOADS as u64), "{after}");
    assert_eq!(after["reload_failures"].as_u64(), Some(0), "{after}");
    assert_eq!(
        after["version"].as_u64(),
        Some(RELOADS as u64 + 1),
        "{after}"
    );
    let seen = map_numbers(&sw.map("seen"));
    let by = |k: u64| seen.iter().find(|r| r.0 == k).map_or(0, |r| r.1);
    assert!(by(0) > 0 && by(1) > 0, "seen {seen:?}");
    assert!(
        by(0) + by(1) >= sent + 500,
        "seen {seen:?}, sent {sent} + 500"
    );
    let fin = sw.stop();
    assert_eq!(fin["reloads"].as_u64(), Some(RELOADS as u64), "{fin}");
    assert_eq!(fin["faults"].as_u64().unwrap_or(0), 0, "{fin}");
    eprintln!(
        "reloads ({kind}): {RELOADS} reloads under {sent} numbered frames ({:.1} s of traffic), \
         seen {seen:?}; {:.1} s in all",
        sent_report["seconds"].as_f64().unwrap_or(0.0),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn the_ddos_example_blacklists_flooders_and_delivers_legitimate_traffic() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    ddos_on("afpacket", "swvd", ("198.18.52", "198.18.53"));
}

/// The same through AF_XDP ports (copy mode on veth).
#[test]
fn the_ddos_example_through_afxdp_ports_blacklists_flooders() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    ddos_on("afxdp", "swxd", ("198.18.58", "198.18.59"));
}

/// The DDoS scenario through ports of `kind`.
fn ddos_on(kind: &str, tag: &str, nets: (&str, &str)) {
    let t0 = Instant::now();
    let dir = Dir::new(&format!("{tag}-ddos"));
    let bed = Bed::new(tag, nets.0, nets.1);
    let script = examples().join("ddos.py").display().to_string();
    let sw = Switch::start_on(kind, &bed, &dir, tag, &script, &[]);
    let rx = Recv::start(&bed);
    let (l, r) = (&bed.left_net, &bed.right_net);
    let flows = |srcs: &[&str], dst: &str| {
        srcs.iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "src={l}.{s},dst={r}.{dst},sport={},dport=9000,len=64",
                    40000 + i
                )
            })
            .collect::<Vec<_>>()
            .join(";")
    };

    // Warm-up towards another destination (its own token bucket).
    let warm = send_ok(
        send_cmd(
            &bed,
            &flows(&["9"], "9"),
            &["--rate", "200", "--count", "10", "--seq", "--stream", "3"],
        )
        .output()
        .expect("send"),
    );
    assert_eq!(warm["sent"], 10, "{warm}");
    assert_eq!(rx.wait_for(3, 10), 10, "warm-up frames through the switch");

    // scripts/demo.sh's traffic: 3 legitimate sources x 15 pps (under
    // the 100 pps per destination), 2 flooders x 500 pps from 1 s on.
    let legit = send_cmd(
        &bed,
        &flows(&["11", "12", "13"], "2"),
        &["--rate", "45", "--duration", "6", "--seq", "--stream", "1"],
    )
    .spawn()
    .expect("legitimate sender");
    let legit = Proc(legit);
    std::thread::sleep(Duration::from_secs(1));
    let flood = send_ok(
        send_cmd(
            &bed,
            &flows(&["66", "67"], "2"),
            &[
                "--rate",
                "1000",
                "--duration",
                "4",
                "--seq",
                "--stream",
                "2",
            ],
        )
        .output()
        .expect("flood sender"),
    );
    let (ok, out, err) = legit.finish();
    assert!(ok, "legitimate sender: {err}");
    let legit = json(&out);
    let legit_sent = legit["sent"].as_u64().expect("sent");
    let flood_sent = flood["sent"].as_u64().expect("sent");
    assert!(legit_sent > 200 && flood_sent > 3000, "{legit} {flood}");
    rx.wait_for(1, legit_sent);

    // The blacklist and the verdicts, while the flooders are listed
    // (10 s).
    let blacklist = sw.map("nf_sets_src");
    let st = sw.status();
    let report = rx.finish();
    assert_delivered("legitimate", &report, 1, legit_sent);
    let flood_got = received(&report, 2);
    assert!(
        flood_got * 5 < flood_sent,
        "the flood got through: {flood_got} of {flood_sent}"
    );
    // Exactly the flooders (scripts/demo.sh lists the set's keys).
    let mut listed: Vec<String> = blacklist
        .as_array()
        .unwrap_or_else(|| panic!("rows: {blacklist}"))
        .iter()
        .map(|r| r["key"].as_str().unwrap_or_default().to_string())
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [format!("{l}.66"), format!("{l}.67")],
        "the blacklist: {blacklist}"
    );
    let drops = st["verdicts"]["DROP"].as_u64().unwrap_or(0);
    assert!(drops > flood_sent / 2, "DROP {drops} of {flood_sent}: {st}");
    let fin = sw.stop();
    assert_eq!(fin["faults"].as_u64().unwrap_or(0), 0, "{fin}");
    eprintln!(
        "ddos ({kind}): legitimate {legit_sent} sent, all delivered; flood {flood_got} of \
         {flood_sent} delivered, DROP {drops}; {:.1} s in all",
        t0.elapsed().as_secs_f64()
    );
}

/// Hostile update `i` (one of nine kinds) for switch `name`, signed
/// where it is with `key`; with the reasons it may be refused for.
fn hostile(
    i: usize,
    name: &str,
    key: &nfkit_update::Key,
    replay: &[u8],
    rng: &mut u64,
) -> (Vec<u8>, &'static [&'static str]) {
    use nfkit_update::message::CodeFormat;
    use nfkit_update::{Body, Key, Message, Position};
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    let msg = |target: &str, version: u64| {
        Message::new(
            target,
            Position::Pre,
            version,
            Body::Code {
                format: CodeFormat::ChainScript,
                name: "h.py".into(),
                bytes: pass_through(0).into_bytes(),
            },
        )
        .expect("message")
    };
    let fresh = || msg(name, 3 + (i as u64 % 5));
    match i % 9 {
        0 => {
            let len = (next() % 300) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i.is_multiple_of(2) && len >= 4 {
                b[..4].copy_from_slice(b"NFKU");
            }
            (b, &["malformed", "truncated"])
        }
        1 => {
            let other = Key::new(key.id, [0x5a; 32]).expect("key");
            (fresh().seal(&other).expect("seal"), &["forged"])
        }
        2 => {
            let mut b = fresh().seal(key).expect("seal");
            let at = 44 + name.len() + 32 + (next() % 32) as usize;
            b[at] ^= 1 << (next() % 8);
            (b, &["forged"])
        }
        3 => {
            let mut b = fresh().seal(key).expect("seal");
            let at = (next() as usize) % b.len();
            b[at] ^= 1 << (next() % 8);
            (
                b,
                &[
                    "forged",
                    "digest",
                    "malformed",
                    "truncated",
                    "unknown_key",
                    "unauthenticated",
                ],
            )
        }
        4 => {
            let b = fresh().seal(key).expect("seal");
            let cut = (next() as usize) % b.len();
            (b[..cut].to_vec(), &["truncated"])
        }
        5 => (replay.to_vec(), &["replayed"]),
        6 => (
            msg(name, 1 + (i as u64 % 2)).seal(key).expect("seal"),
            &["downgrade"],
        ),
        7 => (
            msg("another", 9).seal(key).expect("seal"),
            &["wrong_target"],
        ),
        _ => (fresh().unsigned().expect("unsigned"), &["unauthenticated"]),
    }
}

const HOSTILE: usize = 10_008;

#[test]
fn hostile_updates_are_refused_under_numbered_traffic_and_a_valid_one_applies() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let t0 = Instant::now();
    let dir = Dir::new("swv-update");
    let bed = Bed::new("authu", "198.18.54", "198.18.55");
    let v = [dir.path("v1.py"), dir.path("v2.py")];
    std::fs::write(&v[0], pass_through(0)).expect("v1");
    std::fs::write(&v[1], pass_through(1)).expect("v2");
    let keys = dir.path("keys");
    let o = Command::new(NFKIT)
        .args(["switch", "keygen", &keys])
        .output()
        .expect("keygen");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ring = nfkit_update::KeyRing::load(std::path::Path::new(&keys)).expect("keys");
    let key = ring.newest().expect("a key").clone();
    let udp = format!("udp:{}.254:7400", bed.left_net);
    let name = "authu";
    let sw = Switch::start_with(
        &bed,
        &dir,
        name,
        &v[0],
        &["--key", &keys, "--update-listen", &udp],
    );
    let rx = Recv::start(&bed);
    let flows = flows(&bed);
    let sender = numbered(&bed, &rx, &flows);
    // Version 2 applies (the message replayed below).
    let v2 = nfkit_update::Message::new(
        name,
        nfkit_update::Position::Pre,
        2,
        nfkit_update::Body::Code {
            format: nfkit_update::message::CodeFormat::ChainScript,
            name: "v2.py".into(),
            bytes: pass_through(1).into_bytes(),
        },
    )
    .expect("message")
    .seal(&key)
    .expect("seal");
    let hex = nfkit_update::hex::encode;
    let a = sw.request(&json!({"op": "update", "message": hex(&v2)}));
    assert_eq!(a["ok"], true, "{a}");
    // The barrage, on the control socket.
    // The barrage, over UDP from the sender's namespace to the switch's
    // update address, one datagram and its answer at a time. Its thread
    // gives way to the switch's workers (a real sender is elsewhere).
    let to: std::net::SocketAddr = format!("{}.254:7400", bed.left_net)
        .parse()
        .expect("address");
    let ns = bed.sender.name().to_string();
    let (k, replay) = (key.clone(), v2.clone());
    let barrage = std::thread::spawn(move || {
        nfkit_kernel::netns::enter_netns(&ns).expect("enter the sender's netns");
        nfkit_switch::pin::nice_current(10);
        let sock = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut by_reason: std::collections::BTreeMap<String, u64> = Default::default();
        let mut buf = vec![0u8; 65536];
        for i in 0..HOSTILE {
            let (bytes, allowed) = hostile(i, name, &k, &replay, &mut rng);
            sock.send_to(&bytes, to).expect("send");
            let n = sock
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no answer to hostile update {i}: {e}"));
            let a = json(&String::from_utf8_lossy(&buf[..n]));
            assert_eq!(a["ok"], false, "hostile update {i} applied: {a}");
            let reason = a["reason"].as_str().unwrap_or("?").to_string();
            assert!(
                allowed.contains(&reason.as_str()),
                "hostile update {i}: {a}, expected one of {allowed:?}"
            );
            *by_reason.entry(reason).or_default() += 1;
        }
        by_reason
    });
    let by_reason = barrage.join().expect("the barrage");
    let mid = sw.status();
    assert_eq!(mid["version"].as_u64(), Some(2), "{mid}");
    // A valid update over UDP from the sender's namespace.
    let o = Command::new("ip")
        .args(["netns", "exec", bed.sender.name(), NFKIT])
        .args([
            "switch",
            "update",
            "--switch",
            &udp,
            "--target",
            name,
            "--version",
            "3",
            "--key",
            &keys,
            "--json",
            &v[0],
        ])
        .output()
        .expect("nfkit switch update");
    assert!(
        o.status.success(),
        "update over UDP: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let r = json(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(r["version"], 3, "{r}");
    let at_last = stream_of(&rx.next(Duration::from_secs(10)), 2)["received"]
        .as_u64()
        .unwrap_or(0);
    rx.wait_for(2, at_last + MARGIN);
    sender.signal("-INT");
    let (_, out, err) = sender.finish();
    let sent_report = json(&out);
    assert_eq!(sent_report["interrupted"], true, "{sent_report} {err}");
    let sent = sent_report["sent"].as_u64().expect("sent");
    assert!(sent < 2_000_000, "the sender ran out during the barrage");
    rx.wait_for(2, sent);
    let report = rx.finish();
    let st = sw.status();
    let u = &st["updates"];
    assert_eq!(u["applied"].as_u64(), Some(2), "{st}");
    assert_eq!(u["refused"].as_u64(), Some(HOSTILE as u64), "{st}");
    for (reason, n) in &by_reason {
        assert_eq!(u["reasons"][reason].as_u64(), Some(*n), "{reason}: {st}");
    }
    assert!(by_reason.len() >= 9, "{by_reason:?}");
    assert_eq!(st["version"].as_u64(), Some(3), "{st}");
    // Every refusal logged with its reason.
    let log = sw.stderr();
    let logged = log.lines().filter(|l| l.contains("refused (")).count();
    assert_eq!(logged, HOSTILE, "{}", &log[..log.len().min(2000)]);
    let fin = sw.stop();
    assert_eq!(fin["faults"].as_u64().unwrap_or(0), 0, "{fin}");
    eprintln!(
        "update run: switch ports {}, dropped by the ports {}",
        fin["ports"], fin["port_dropped"]
    );
    assert_delivered("update run", &report, 2, sent);
    eprintln!(
        "updates: {HOSTILE} hostile refused ({by_reason:?}) and 2 applied under {sent} \
         numbered frames; {:.1} s in all",
        t0.elapsed().as_secs_f64()
    );
}

/// Kills the daemon and the switch by pid when the test ends early.
struct Pids(Vec<u32>);

impl Drop for Pids {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("kill").args(["-9", &p.to_string()]).output();
        }
    }
}

/// `nfkit ARGS` with the test's run directory (nfkitd's socket there is
/// used when it answers); (exit code, stdout, stderr).
fn nfkit_in(run: &str, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(NFKIT)
        .args(args)
        .env("NFKIT_RUN_DIR", run)
        .env_remove("NFKIT_DAEMON")
        .output()
        .expect("run nfkit");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn nfkit_in_ok(run: &str, args: &[&str]) -> String {
    let (code, o, e) = nfkit_in(run, args);
    assert_eq!(code, 0, "nfkit {args:?}: {o}{e}");
    o
}

/// `GET /metrics` at 127.0.0.1:`port`.
fn scrape(port: u16) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics");
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("answer");
    body
}

/// A status answer without what changes from one read to the next.
fn steady(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        for k in ["uptime_s", "latency"] {
            m.remove(k);
        }
    }
    v
}

/// Issue 18, switches through nfkitd: `nfkit switch start` through the
/// daemon starts the switch (AF_PACKET ports in the DUT namespace, its
/// own process); warm-up frames are forwarded as the chain says
/// (REDIRECT(2)); five `nfkit switch reload` through the daemon under
/// 20 kpps of numbered UDP, then `kill -9` of nfkitd, and the traffic
/// goes on: every frame sent arrives exactly once. The scrape before the
/// kill has the switch's per-chain counters and five swaps in the swap
/// histogram. The restarted daemon adopts the switch (`daemon status`),
/// lists it in ListDeployments with its counters, `switch status`
/// prints the same through it as directly, and `switch stop` through it
/// stops the process and leaves no socket, record or file. The audit log
/// has every change.
#[test]
fn daemon_switch_deploy_redeploy_survives_kill_is_adopted_and_undeployed() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    const SWAPS: u64 = 5;
    let tag = "dmnsw";
    let dir = Dir::new(tag);
    let bed = Bed::new(tag, "198.18.62", "198.18.63");
    let run = dir.path("run");
    let v = [dir.path("v1.py"), dir.path("v2.py")];
    std::fs::write(&v[0], pass_through(0)).expect("v1");
    std::fs::write(&v[1], pass_through(1)).expect("v2");
    let cfg = dir.path("nfkitd.toml");
    std::fs::write(
        &cfg,
        format!(
            "run_dir = {run:?}\ndata_dir = {:?}\nswitch_dir = {run:?}\nnfkit = {NFKIT:?}\n",
            dir.path("data")
        ),
    )
    .expect("config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let metrics = format!("127.0.0.1:{port}");
    nfkit_in_ok(
        &run,
        &["daemon", "start", "--config", &cfg, "--metrics", &metrics],
    );
    let info = json(&nfkit_in_ok(&run, &["daemon", "status", "--json"]));
    let mut pids = Pids(vec![info["pid"].as_u64().expect("pid") as u32]);

    let p1 = format!("{}:afpacket", bed.left.b.dev);
    let p2 = format!("{}:afpacket", bed.right.a.dev);
    let started = json(&nfkit_in_ok(
        &run,
        &[
            "switch",
            "start",
            "--name",
            tag,
            "--port",
            &p1,
            "--port",
            &p2,
            "--host",
            "2",
            "--no-pin",
            "--workers",
            "2",
            "--netns",
            bed.dut.name(),
            &v[0],
            "--json",
        ],
    ));
    let sw_pid = started["pid"].as_u64().expect("pid") as u32;
    pids.0.push(sw_pid);
    let recorded = std::fs::read_to_string(format!("{run}/switches.json")).expect("record");
    assert!(
        recorded.contains(&format!("\"pid\": {sw_pid}")),
        "{recorded}"
    );

    let rx = Recv::start(&bed);
    let flows = flows(&bed);
    warm_up(&bed, &rx, &flows);

    let sender = numbered(&bed, &rx, &flows);
    for i in 0..SWAPS as usize {
        let out = nfkit_in_ok(&run, &["switch", "reload", tag, &v[(i + 1) % 2]]);
        assert!(out.starts_with("switched to version"), "{out}");
    }
    let body = scrape(port);
    let sc = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("the scrape parses");
    let sample = |name: &str, labels: &[(&str, &str)]| {
        sc.samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(x)
                | prometheus_parse::Value::Gauge(x)
                | prometheus_parse::Value::Untyped(x) => x,
                prometheus_parse::Value::Histogram(ref h) => h.last().map_or(0.0, |b| b.count),
                _ => f64::NAN,
            })
    };
    assert!(
        sample(
            "nfkit_switch_chain_packets_total",
            &[("switch", tag), ("verdict", "REDIRECT")]
        )
        .is_some_and(|n| n > 0.0),
        "{body}"
    );
    assert_eq!(
        sample("nfkit_switch_version", &[("switch", tag)]),
        Some(SWAPS as f64 + 1.0),
        "{body}"
    );
    assert!(
        body.contains(&format!("nfkitd_switch_swap_seconds_count {SWAPS}")),
        "{body}"
    );
    assert!(
        body.contains("nfkitd_switch_deploy_seconds_count 6"),
        "{body}"
    );
    assert!(
        body.contains(
            "nfkitd_requests_total{rpc=\"nfkit.v1.SwitchService/RedeploySwitch\",code=\"OK\"} 5"
        ),
        "{body}"
    );

    // kill -9 of the daemon: the switch goes on forwarding.
    let before = stream_of(&rx.next(Duration::from_secs(10)), 2)["received"]
        .as_u64()
        .unwrap_or(0);
    let _ = Command::new("kill")
        .args(["-9", &pids.0[0].to_string()])
        .output();
    assert!(
        rx.wait_for(2, before + 2 * MARGIN) >= before + 2 * MARGIN,
        "the switch stopped forwarding when nfkitd was killed"
    );
    sender.signal("-INT");
    let (_, out, err) = sender.finish();
    let sent_report = json(&out);
    let sent = sent_report["sent"].as_u64().expect("sent");
    assert_eq!(sent_report["stamped"].as_u64(), Some(sent), "{err}");
    rx.wait_for(2, sent);
    let report = rx.finish();
    assert_delivered("redeploys, then nfkitd killed", &report, 2, sent);
    assert_delivered("warm-up", &report, 1, 500);
    // Directly (the daemon's socket does not answer).
    let direct = json(&nfkit_in_ok(&run, &["switch", "status", tag, "--json"]));
    assert_eq!(direct["version"].as_u64(), Some(SWAPS + 1), "{direct}");

    // The restarted daemon adopts it.
    nfkit_in_ok(&run, &["daemon", "start", "--config", &cfg]);
    let info = json(&nfkit_in_ok(&run, &["daemon", "status", "--json"]));
    pids.0[0] = info["pid"].as_u64().expect("pid") as u32;
    let adopted = info["adopted"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["dev"] == tag).cloned())
        .unwrap_or_else(|| panic!("{info}"));
    assert_eq!(adopted["attach"], "switch", "{adopted}");
    assert_eq!(adopted["outcome"], "adopted", "{adopted}");
    assert!(
        adopted["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("pid {sw_pid}, version {}", SWAPS + 1))),
        "{adopted}"
    );
    let via = json(&nfkit_in_ok(&run, &["switch", "status", tag, "--json"]));
    let direct = {
        let o = Command::new(NFKIT)
            .args(["switch", "status", tag, "--json"])
            .env("NFKIT_RUN_DIR", &run)
            .env("NFKIT_DAEMON", "off")
            .output()
            .expect("nfkit");
        json(&String::from_utf8_lossy(&o.stdout))
    };
    assert_eq!(steady(via), steady(direct), "through nfkitd vs directly");
    {
        use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
        let c = nfkit_daemon::Client::connect(std::path::Path::new(&format!("{run}/nfkitd.sock")))
            .expect("connect to nfkitd");
        let list = c
            .block_on(
                DeploymentServiceClient::new(c.channel())
                    .list_deployments(nfkit_daemon::proto::ListDeploymentsRequest {}),
            )
            .expect("ListDeployments")
            .into_inner();
        let s = list
            .switches
            .iter()
            .find(|s| s.name == tag)
            .unwrap_or_else(|| panic!("{list:?}"));
        assert!(s.running && s.managed, "{s:?}");
        assert_eq!((s.pid, s.version), (sw_pid, SWAPS + 1));
        assert!(s.digest.starts_with("sha256:"), "{s:?}");
        // The running version's per-chain counters, as the switch says.
        let st: Value = serde_json::from_str(&s.status_json).expect("status_json");
        let chains = &st["chains"][0];
        assert_eq!(s.verdicts.len(), 1, "{s:?}");
        assert_eq!(s.verdicts[0].chain, chains["chain"].as_str().unwrap_or("?"));
        assert_eq!(
            s.verdicts[0].counts.get("REDIRECT").copied(),
            chains["counts"]["REDIRECT"].as_u64(),
            "{s:?}"
        );
        assert!(s.verdicts[0].counts["REDIRECT"] > 0, "{s:?}");
        // Every frame, over every version.
        let redirected = st["verdicts"]["REDIRECT"].as_u64().unwrap_or(0);
        assert!(redirected >= sent + 500, "{st}, sent {sent} + 500");
    }

    // Undeploy through it: nothing left.
    let out = nfkit_in_ok(&run, &["switch", "stop", tag]);
    assert_eq!(out.trim(), format!("switch {tag} stopped"));
    assert!(!std::path::Path::new(&format!("{run}/{tag}.sock")).exists());
    // Gone (or a zombie its new parent has not reaped yet).
    assert!(
        !nfkit_daemon::switches::alive(sw_pid),
        "switch {sw_pid} runs"
    );
    assert!(!std::path::Path::new(&format!("{run}/switches/{tag}")).exists());
    let recorded = std::fs::read_to_string(format!("{run}/switches.json")).expect("record");
    assert!(!recorded.contains(tag), "{recorded}");
    let out = nfkit_in_ok(&run, &["switch", "status"]);
    assert!(out.starts_with("no switch running"), "{out}");
    let audit = std::fs::read_to_string(dir.path("data/audit.log")).expect("audit log");
    let count = |rpc: &str| {
        audit
            .lines()
            .filter(|l| l.contains(rpc) && l.contains("\"ok\"") && l.contains(tag))
            .count()
    };
    assert_eq!(count("SwitchService/DeploySwitch"), 1, "{audit}");
    assert_eq!(
        count("SwitchService/RedeploySwitch"),
        SWAPS as usize,
        "{audit}"
    );
    assert_eq!(count("SwitchService/UndeploySwitch"), 1, "{audit}");
    nfkit_in_ok(&run, &["daemon", "stop"]);
    eprintln!(
        "daemon switch: {SWAPS} redeploys and a kill -9 of nfkitd under {sent} numbered frames, none lost"
    );
}
