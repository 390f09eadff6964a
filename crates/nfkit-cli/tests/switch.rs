//! `nfkit switch run` on pcap ports: an example's verdicts per chain are
//! `nfkit run`'s, the frames it redirects and passes land in the port
//! and host outputs, `--json` reports ports, verdicts and chains; bad
//! ports and `--host` names are errors that say what is accepted.

mod common;
use common::{examples, json, stdout_ok, Dir};
use std::process::Command;

/// `nfkit ARGS`, control sockets in a directory of this test process
/// (not the system's run directory).
fn nfkit(args: &[&str]) -> std::process::Output {
    let run = std::env::temp_dir().join(format!("nfkit-switch-run-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .env("NFKIT_RUN_DIR", run)
        .output()
        .expect("run nfkit")
}

#[test]
fn an_example_on_pcap_ports_gives_nfkit_runs_verdicts() {
    let d = Dir::new("switch-run");
    let script = examples().join("dscp_dispatch.py").display().to_string();
    let pcap = examples().join("dscp_dispatch.pcap").display().to_string();
    let run = json(&stdout_ok(&nfkit(&[
        "run", &script, "--pcap", &pcap, "--json",
    ])));
    let p1 = format!("p1:pcap={pcap},out={}", d.path("p1.pcap"));
    let p2 = format!("p2:pcap,out={}", d.path("p2.pcap"));
    let p3 = format!("p3:pcap,out={}", d.path("p3.pcap"));
    let host = format!("host:pcap,out={}", d.path("host.pcap"));
    for workers in ["1", "2"] {
        let sw = json(&stdout_ok(&nfkit(&[
            "switch",
            "run",
            "--name",
            "sw0",
            "--port",
            &p1,
            "--port",
            &p2,
            "--port",
            &p3,
            "--port",
            &host,
            "--host",
            "host",
            "--workers",
            workers,
            "--no-pin",
            "--json",
            &script,
        ])));
        assert_eq!(sw["name"], "sw0");
        assert_eq!(sw["chains"], run["chains"], "{workers} workers");
        assert_eq!(sw["ports"][0]["rx"], run["packets"]);
        let verdicts = &sw["verdicts"];
        let redirected = verdicts["REDIRECT"].as_u64().unwrap_or(0);
        let passed = verdicts["PASS"].as_u64().unwrap_or(0);
        assert!(redirected > 0 && passed > 0, "{verdicts}");
        // REDIRECT(3) goes out of port 3, PASS out of the host port.
        assert_eq!(sw["ports"][2]["tx"].as_u64(), Some(redirected));
        assert_eq!(sw["ports"][3]["tx"].as_u64(), Some(passed));
        let out3 = nfkit_pcap::read_file(d.path("p3.pcap")).expect("p3 output");
        assert_eq!(out3.len() as u64, redirected);
        let out_host = nfkit_pcap::read_file(d.path("host.pcap")).expect("host output");
        assert_eq!(out_host.len() as u64, passed);
    }
    // Text report.
    let text = stdout_ok(&nfkit(&[
        "switch", "run", "--name", "sw0", "--port", &p1, "--no-pin", &script,
    ]));
    assert!(text.contains("switch sw0: 1 workers"), "{text}");
    assert!(text.contains("no host port"), "{text}");
    assert!(text.contains("engine: "), "{text}");
}

#[test]
fn bad_ports_and_hosts_are_errors() {
    let script = examples().join("ddos.py").display().to_string();
    let o = nfkit(&["switch", "run", "--name", "s", "--port", "p:pcap", &script]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("a pcap port needs"), "{err}");
    let pcap = examples().join("ddos.pcap").display().to_string();
    let p = format!("p:pcap={pcap}");
    let o = nfkit(&[
        "switch", "run", "--name", "s", "--port", &p, "--host", "9", &script,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--host 9: no such port"), "{err}");
}

#[test]
fn deploy_refuses_a_switch_script() {
    let d = Dir::new("switch-deploy");
    let script = d.path("sw.py");
    std::fs::write(
        &script,
        "from nf.classify import every_packet\ndef main() -> u64:\n    return PASS\n\
         every_packet(main)\nattach(\"sw0\", \"switch\")\n",
    )
    .expect("script");
    let o = Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(["deploy", &script, "--dev", "lo"])
        .env("NFKIT_STATE_DIR", d.path("state"))
        .env("NFKIT_PIN_ROOT", d.path("pins"))
        .output()
        .expect("run nfkit");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nfkit switch run"), "{err}");
}

#[test]
fn controller_frames_are_counted_per_reason_and_written() {
    let d = Dir::new("switch-ctl");
    let script = d.path("ctl.py");
    std::fs::write(
        &script,
        "from nf.classify import every_packet\ndef main() -> u64:\n\
         \x20   if Packet.dport == 80:\n        return CONTROLLER(7)\n\
         \x20   return DROP\nevery_packet(main)\n",
    )
    .expect("script");
    let pcap = examples().join("ddos.pcap").display().to_string();
    let port = format!("p1:pcap={pcap}");
    let ctl = d.path("ctl.pcap");
    let v = json(&stdout_ok(&nfkit(&[
        "switch",
        "run",
        "--name",
        "c",
        "--port",
        &port,
        "--controller",
        &ctl,
        "--json",
        "--no-pin",
        &script,
    ])));
    let n = v["controller_frames"].as_u64().expect("count");
    assert!(n > 0, "{v}");
    assert_eq!(v["controller_reasons"]["7"].as_u64(), Some(n));
    assert_eq!(v["verdicts"]["CONTROLLER"].as_u64(), Some(n));
    let written = nfkit_pcap::read_file(&ctl).expect("controller pcap");
    assert_eq!(written.len() as u64, n);
}

/// `nfkit ARGS` with the control sockets in `run_dir`.
fn nfkit_in(run_dir: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .env("NFKIT_RUN_DIR", run_dir)
        .output()
        .expect("run nfkit")
}

/// Kills the switch a test started if the test fails before stopping it.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn a_running_switch_answers_status_reload_and_stop_on_its_socket() {
    let d = Dir::new("switch-ctl-sock");
    let run_dir = d.path("run");
    let script = examples().join("ddos.py").display().to_string();
    let pcap = examples().join("ddos.pcap").display().to_string();
    let port = format!("p1:pcap={pcap},out={}", d.path("p1.pcap"));
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_nfkit"))
            .args([
                "switch",
                "run",
                "--name",
                "ctl0",
                "--port",
                &port,
                "--workers",
                "2",
                "--no-pin",
                "--linger",
                "--json",
                &script,
            ])
            .env("NFKIT_RUN_DIR", &run_dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the switch"),
    );
    let sock = std::path::Path::new(&run_dir).join("ctl0.sock");
    let t = std::time::Instant::now();
    while !sock.exists() {
        assert!(t.elapsed().as_secs() < 60, "no control socket");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A second switch of the same name is refused.
    let o = nfkit_in(
        &run_dir,
        &["switch", "run", "--name", "ctl0", "--port", &port, &script],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("already running") && err.contains("ctl0.sock"),
        "{err}"
    );
    // Status of every switch, then of this one (the replay is done:
    // every frame of the capture counted).
    let packets = nfkit_pcap::read_file(&pcap).expect("pcap").len() as u64;
    let st = loop {
        let all = json(&stdout_ok(&nfkit_in(
            &run_dir,
            &["switch", "status", "--json"],
        )));
        let st = all[0].clone();
        if st["ports"][0]["rx"].as_u64() == Some(packets) {
            break st;
        }
        assert!(t.elapsed().as_secs() < 60, "{all}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(st["name"], "ctl0");
    assert_eq!(st["version"], 1);
    assert_eq!(st["workers"], 2);
    assert_eq!(st["pid"].as_u64(), Some(u64::from(child.0.id())));
    let text = stdout_ok(&nfkit_in(&run_dir, &["switch", "status", "ctl0"]));
    assert!(
        text.contains("switch ctl0: pid") && text.contains("version 1"),
        "{text}"
    );
    // The running version's map (ddos.py's per-CPU counters).
    let rows = json(&stdout_ok(&nfkit_in(
        &run_dir,
        &["switch", "map", "ctl0", "counters", "--json"],
    )));
    assert!(!rows.as_array().expect("rows").is_empty(), "{rows}");
    let o = nfkit_in(&run_dir, &["switch", "map", "ctl0", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    // A good reload, then one that does not compile.
    let other = examples().join("dscp_dispatch.py").display().to_string();
    let text = stdout_ok(&nfkit_in(&run_dir, &["switch", "reload", "ctl0", &other]));
    assert!(text.starts_with("switched to version 2 in "), "{text}");
    assert!(text.contains("all 2 workers"), "{text}");
    let bad = d.path("bad.py");
    std::fs::write(&bad, "def main(:\n").expect("bad script");
    let o = nfkit_in(&run_dir, &["switch", "reload", "ctl0", &bad]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("switch ctl0") && err.contains("invalid syntax"),
        "{err}"
    );
    let st = json(&stdout_ok(&nfkit_in(
        &run_dir,
        &["switch", "status", "ctl0", "--json"],
    )));
    assert_eq!(st["version"], 2);
    assert_eq!(st["reloads"], 1);
    assert_eq!(st["reload_failures"], 1);
    // Stop: the switch prints its report and exits; the socket is gone.
    let text = stdout_ok(&nfkit_in(&run_dir, &["switch", "stop", "ctl0"]));
    assert!(text.contains("switch ctl0 stopped"), "{text}");
    assert!(!sock.exists());
    let out = std::mem::replace(&mut child.0, Command::new("true").spawn().expect("true"))
        .wait_with_output()
        .expect("switch output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(report["version"], 2);
    assert_eq!(report["ports"][0]["rx"].as_u64(), Some(packets));
    // A stopped switch: the error names it and its socket.
    let o = nfkit_in(&run_dir, &["switch", "status", "ctl0"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("switch ctl0") && err.contains("ctl0.sock"),
        "{err}"
    );
}
