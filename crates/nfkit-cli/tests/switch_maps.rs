//! The control socket of a running switch (pcap ports, `--linger`):
//! `nfkit map list|dump|get|set|delete --switch NAME` read the entries
//! the chain wrote (the same as `nfkit run`'s maps for the same pcap)
//! and write the running version's maps; a switch started with `--key`
//! answers reads and refuses writes (counted as unauthenticated, with
//! the signed command to use). `nfkit switch trace NAME` reads the
//! controller channel from another process: port, reason, length and
//! first bytes of each CONTROLLER(reason) frame.

mod common;
use common::{examples, json, stdout_ok, Dir};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn nfkit_in(run_dir: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .env("NFKIT_RUN_DIR", run_dir)
        .env("NFKIT_DAEMON", "off")
        .output()
        .expect("run nfkit")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A switch started in the background; killed if the test fails first.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `nfkit switch run --name NAME --linger --no-pin ARGS` and
/// waits until it has replayed its pcap input (its port 1 received
/// `frames`).
fn start(run_dir: &str, name: &str, args: &[&str], frames: u64) -> Child {
    let mut all = vec!["switch", "run", "--name", name, "--no-pin", "--linger"];
    all.extend_from_slice(args);
    let child = Child(
        Command::new(env!("CARGO_BIN_EXE_nfkit"))
            .args(&all)
            .env("NFKIT_RUN_DIR", run_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the switch"),
    );
    let t = Instant::now();
    loop {
        assert!(
            t.elapsed().as_secs() < 60,
            "switch {name} did not replay its input"
        );
        let o = nfkit_in(run_dir, &["switch", "status", name, "--json"]);
        if o.status.success() {
            let v = json(&String::from_utf8_lossy(&o.stdout));
            if v["ports"][0]["rx"].as_u64() == Some(frames) {
                return child;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn frames_in(pcap: &str) -> u64 {
    nfkit_pcap::read_file(pcap).expect("pcap").len() as u64
}

#[test]
fn maps_of_a_running_switch_are_read_and_written() {
    let d = Dir::new("switch-maps");
    let run_dir = d.path("run");
    let script = examples().join("port_stats.py").display().to_string();
    let pcap = examples().join("port_stats.pcap").display().to_string();
    let run = json(&stdout_ok(&nfkit_in(
        &run_dir,
        &["run", &script, "--pcap", &pcap, "--json"],
    )));
    let port = format!("p1:pcap={pcap}");
    let mut child = start(
        &run_dir,
        "m0",
        &["--port", &port, "--workers", "2", &script],
        frames_in(&pcap),
    );
    let map = |args: &[&str]| {
        let mut all = vec!["map"];
        all.extend_from_slice(args);
        nfkit_in(&run_dir, &all)
    };
    // The chain's entries, as `nfkit run` leaves them.
    for name in ["packets", "bytes_", "blocked", "first_len"] {
        let rows = json(&stdout_ok(&map(&[
            "dump", name, "--switch", "m0", "--json",
        ])));
        assert_eq!(rows, run["maps"][name], "map {name}");
    }
    let list = stdout_ok(&map(&["list", "--switch", "m0"]));
    assert!(
        list.contains("blocked Hash key u16 (2 B) value u8 (1 B) max 64"),
        "{list}"
    );
    let bytes80 = run["maps"]["bytes_"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["key"] == 80))
        .map(|e| e["value"].to_string())
        .expect("bytes of port 80");
    assert_eq!(
        stdout_ok(&map(&["get", "bytes_", "80", "--switch", "m0"])).trim(),
        bytes80
    );
    // Writes land in the maps the workers use.
    stdout_ok(&map(&["set", "blocked", "8080", "3", "--switch", "m0"]));
    let got = json(&stdout_ok(&map(&[
        "get", "blocked", "8080", "--switch", "m0", "--json",
    ])));
    assert_eq!(got, serde_json::json!({"key": 8080, "value": 3}));
    stdout_ok(&map(&["delete", "blocked", "53", "--switch", "m0"]));
    let rows = json(&stdout_ok(&map(&[
        "dump", "blocked", "--switch", "m0", "--json",
    ])));
    assert_eq!(rows, serde_json::json!([{"key": 8080, "value": 3}]));
    // Bad input: said, and the switch goes on.
    let o = map(&["get", "blocked", "53", "--switch", "m0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no such key 53"), "{}", stderr(&o));
    let o = map(&["set", "nope", "1", "2", "--switch", "m0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no map `nope`") && stderr(&o).contains("blocked"),
        "{}",
        stderr(&o)
    );
    let o = map(&["set", "blocked", "70000", "1", "--switch", "m0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("map `blocked`: key"), "{}", stderr(&o));
    let o = map(&["dump", "blocked", "--switch", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is it running?"), "{}", stderr(&o));
    stdout_ok(&nfkit_in(&run_dir, &["switch", "stop", "m0"]));
    assert!(child.0.wait().expect("wait").success());
}

#[test]
fn a_switch_with_a_key_answers_map_reads_and_refuses_writes() {
    let d = Dir::new("switch-maps-key");
    let run_dir = d.path("run");
    let keys = d.path("keys");
    stdout_ok(&nfkit_in(&run_dir, &["switch", "keygen", &keys]));
    let script = examples().join("port_stats.py").display().to_string();
    let pcap = examples().join("port_stats.pcap").display().to_string();
    let port = format!("p1:pcap={pcap}");
    let mut child = start(
        &run_dir,
        "k0",
        &["--port", &port, "--key", &keys, &script],
        frames_in(&pcap),
    );
    let map = |args: &[&str]| {
        let mut all = vec!["map"];
        all.extend_from_slice(args);
        nfkit_in(&run_dir, &all)
    };
    let got = stdout_ok(&map(&["get", "blocked", "53", "--switch", "k0"]));
    assert_eq!(got.trim(), "2");
    let o = map(&["set", "blocked", "8080", "3", "--switch", "k0"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("authenticated writes only")
            && err.contains("--set blocked 901f 03 --key FILE"),
        "{err}"
    );
    let o = map(&["delete", "blocked", "53", "--switch", "k0"]);
    assert_eq!(o.status.code(), Some(1));
    // Nothing changed; both refusals counted.
    let rows = json(&stdout_ok(&map(&[
        "dump", "blocked", "--switch", "k0", "--json",
    ])));
    assert_eq!(rows, serde_json::json!([{"key": 53, "value": 2}]));
    let st = json(&stdout_ok(&nfkit_in(
        &run_dir,
        &["switch", "status", "k0", "--json"],
    )));
    assert_eq!(st["updates"]["refused"], 2, "{st}");
    assert_eq!(st["updates"]["reasons"]["unauthenticated"], 2, "{st}");
    // The signed way the refusal gives works.
    stdout_ok(&nfkit_in(
        &run_dir,
        &[
            "switch", "update", "--switch", "k0", "--set", "blocked", "901f", "03", "--key", &keys,
        ],
    ));
    let got = stdout_ok(&map(&["get", "blocked", "8080", "--switch", "k0"]));
    assert_eq!(got.trim(), "3");
    stdout_ok(&nfkit_in(&run_dir, &["switch", "stop", "k0"]));
    assert!(child.0.wait().expect("wait").success());
}

#[test]
fn trace_reads_controller_frames_from_another_process() {
    let d = Dir::new("switch-trace");
    let run_dir = d.path("run");
    let script = d.path("ctl.py");
    std::fs::write(
        &script,
        "from nf.classify import every_packet\ndef main() -> u64:\n\
         \x20   if Packet.dport == 80:\n        return CONTROLLER(7)\n\
         \x20   if Packet.dport == 53:\n        return CONTROLLER(9)\n\
         \x20   return DROP\nevery_packet(main)\n",
    )
    .expect("script");
    let pcap = examples().join("port_stats.pcap").display().to_string();
    let input = nfkit_pcap::read_file(&pcap).expect("pcap");
    // What the chain should send: (reason, frame) for TCP/UDP to 80, 53.
    let dport = |f: &[u8]| -> Option<u16> {
        if f.get(12..14)? != [8, 0] || !matches!(f.get(23)?, 6 | 17) {
            return None;
        }
        let l4 = 14 + usize::from(f.get(14)? & 0x0f) * 4;
        Some(u16::from_be_bytes([*f.get(l4 + 2)?, *f.get(l4 + 3)?]))
    };
    let expected: Vec<(u64, Vec<u8>)> = input
        .iter()
        .filter_map(|p| match dport(&p.data)? {
            80 => Some((7, p.data.clone())),
            53 => Some((9, p.data.clone())),
            _ => None,
        })
        .collect();
    assert!(expected.len() >= 2, "{expected:?}");
    let port = format!("p1:pcap={pcap}");
    let ctl_out = d.path("ctl.pcap");
    let mut child = start(
        &run_dir,
        "t0",
        &["--port", &port, "--controller", &ctl_out, &script],
        input.len() as u64,
    );
    let n = expected.len().to_string();
    let out = stdout_ok(&nfkit_in(
        &run_dir,
        &["switch", "trace", "t0", "--all", "--count", &n, "--json"],
    ));
    let frames: Vec<serde_json::Value> = out.lines().map(json).collect();
    assert_eq!(frames.len(), expected.len(), "{out}");
    for (i, (f, (reason, data))) in frames.iter().zip(&expected).enumerate() {
        assert_eq!(f["seq"], i as u64, "{f}");
        assert_eq!(f["in_port"], 1, "{f}");
        assert_eq!(f["reason"].as_u64(), Some(*reason), "{f}");
        assert_eq!(f["len"].as_u64(), Some(data.len() as u64), "{f}");
        let head: String = data.iter().take(64).map(|b| format!("{b:02x}")).collect();
        assert_eq!(f["head"].as_str(), Some(head.as_str()), "{f}");
    }
    // Text lines; a trace of new frames only ends when the switch stops,
    // a counted one says it got fewer.
    let text = stdout_ok(&nfkit_in(
        &run_dir,
        &["switch", "trace", "t0", "--all", "--count", "1"],
    ));
    assert!(
        text.starts_with("#0 ") && text.contains("port 1 reason "),
        "{text}"
    );
    let waiting = Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(["switch", "trace", "t0", "--count", "1"])
        .env("NFKIT_RUN_DIR", &run_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("trace");
    std::thread::sleep(Duration::from_millis(300));
    stdout_ok(&nfkit_in(&run_dir, &["switch", "stop", "t0"]));
    let o = waiting.wait_with_output().expect("trace output");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopped after 0 of 1"),
        "{}",
        stderr(&o)
    );
    assert!(child.0.wait().expect("wait").success());
}
