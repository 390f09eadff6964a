//! `nfkit switch update` against a running `nfkit switch run --key`:
//! key files made by `switch keygen` (mode 0600; one readable by others
//! is refused at start), signed updates over the control socket, UDP
//! and TCP on loopback applied with their versions; a plain reload, a
//! downgrade and a wrong key refused (exit 1), counted per reason in
//! `switch status` and logged by the switch; a key added to the file is
//! taken after `switch rekey`; code sent as a chain object (`nfkit
//! compile -o`) applies, one for another hook is refused.

mod common;
use common::{examples, json, stdout_ok, Dir};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn nfkit_in(run_dir: &str, args: &[&str]) -> Output {
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

/// A loopback port free now.
fn free_port(udp: bool) -> u16 {
    if udp {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.local_addr().expect("addr").port()
    } else {
        let s = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        s.local_addr().expect("addr").port()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn signed_updates_over_the_socket_udp_and_tcp_and_refusals() {
    let d = Dir::new("switch-update");
    let run_dir = d.path("run");
    let keys = d.path("keys");
    let other = d.path("other-keys");
    stdout_ok(&nfkit_in(&run_dir, &["switch", "keygen", &keys]));
    stdout_ok(&nfkit_in(&run_dir, &["switch", "keygen", &other]));
    let mode = std::fs::metadata(&keys).expect("keys").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Rotation: a second key in the file.
    let out = stdout_ok(&nfkit_in(&run_dir, &["switch", "keygen", &keys, "--add"]));
    assert!(out.contains("key 2 added"), "{out}");
    let script = examples().join("ddos.py").display().to_string();
    let pcap = examples().join("ddos.pcap").display().to_string();
    let port = format!("p1:pcap={pcap},out={}", d.path("p1.pcap"));

    // A key file others may read: the switch refuses to start.
    let loose = d.path("loose-keys");
    std::fs::copy(&keys, &loose).expect("copy");
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let o = nfkit_in(
        &run_dir,
        &[
            "switch", "run", "--name", "up1", "--port", &port, "--key", &loose, &script,
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("readable or writable by group or others") && err.contains("chmod 600"),
        "{err}"
    );

    let udp = format!("udp:127.0.0.1:{}", free_port(true));
    let tcp = format!("tcp:127.0.0.1:{}", free_port(false));
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_nfkit"))
            .args([
                "switch",
                "run",
                "--name",
                "up0",
                "--port",
                &port,
                "--workers",
                "2",
                "--no-pin",
                "--linger",
                "--key",
                &keys,
                "--update-listen",
                &udp,
                "--update-listen",
                &tcp,
                &script,
            ])
            .env("NFKIT_RUN_DIR", &run_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the switch"),
    );
    let sock = std::path::Path::new(&run_dir).join("up0.sock");
    let t = Instant::now();
    while !sock.exists() {
        assert!(t.elapsed().as_secs() < 60, "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let upd = |extra: &[&str]| {
        let mut args = vec!["switch", "update", "--key", &keys];
        args.extend_from_slice(extra);
        nfkit_in(&run_dir, &args)
    };
    // Over the control socket, the version asked of the switch.
    let out = stdout_ok(&upd(&["--switch", "up0", &script]));
    assert!(out.contains("pre now at version 2"), "{out}");
    // A plain reload is refused: authenticated updates only.
    let o = nfkit_in(&run_dir, &["switch", "reload", "up0", &script]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("authenticated updates only"),
        "{}",
        stderr(&o)
    );
    // Over UDP, then TCP (a downgrade refused, then the next version).
    let out = stdout_ok(&upd(&[
        "--switch",
        &udp,
        "--target",
        "up0",
        "--version",
        "5",
        "--json",
        &script,
    ]));
    let r = json(&out);
    assert_eq!(r["version"], 5);
    assert_eq!(r["previous"], 2);
    assert_eq!(r["key_id"], 2);
    assert!(r["total"].as_f64().unwrap_or(0.0) > 0.0);
    let o = upd(&[
        "--switch",
        &tcp,
        "--target",
        "up0",
        "--version",
        "5",
        &script,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("downgrade"), "{}", stderr(&o));
    let out = stdout_ok(&upd(&[
        "--switch",
        &tcp,
        "--target",
        "up0",
        "--version",
        "6",
        "--key-id",
        "1",
        &script,
    ]));
    assert!(
        out.contains("now at version 6") && out.contains("key 1"),
        "{out}"
    );
    // A key the switch does not have (same id, other bytes): forged.
    let o = nfkit_in(
        &run_dir,
        &[
            "switch", "update", "--key", &other, "--switch", "up0", &script,
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("forged"), "{}", stderr(&o));
    // For another switch: wrong target.
    let o = upd(&[
        "--switch",
        &udp,
        "--target",
        "up9",
        "--version",
        "9",
        &script,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("wrong target"), "{}", stderr(&o));
    // An entry of a map the running version does not have: rejected.
    let o = upd(&["--switch", "up0", "--delete", "no_such_map", "0100"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no map `no_such_map`"),
        "{}",
        stderr(&o)
    );
    // Rotation: a key added to the file is unknown until `rekey`.
    let out = stdout_ok(&nfkit_in(&run_dir, &["switch", "keygen", &keys, "--add"]));
    assert!(out.contains("key 3 added"), "{out}");
    let o = upd(&["--switch", "up0", "--key-id", "3", &script]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown key id 3"), "{}", stderr(&o));
    let out = stdout_ok(&nfkit_in(&run_dir, &["switch", "rekey", "up0"]));
    assert!(out.contains("[1,2,3]"), "{out}");
    let out = stdout_ok(&upd(&["--switch", "up0", "--key-id", "3", &script]));
    assert!(
        out.contains("now at version 7") && out.contains("key 3"),
        "{out}"
    );
    // Code as a chain object: compiled here, only loaded by the switch;
    // the stages of its load in the answer. One compiled for XDP is
    // refused before sending.
    let obj = d.path("ddos.o");
    stdout_ok(&nfkit_in(
        &run_dir,
        &["compile", "--hook", "switch", &script, "-o", &obj],
    ));
    let r = json(&stdout_ok(&upd(&["--switch", "up0", "--json", &obj])));
    assert_eq!(
        (r["version"].as_u64(), r["previous"].as_u64()),
        (Some(8), Some(7))
    );
    for stage in ["decode", "check", "jit", "prepare", "publish"] {
        assert!(r["stages"][stage].as_f64().is_some(), "{stage}: {r}");
    }
    assert!(r["stages"]["check"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    let xdp = d.path("ddos-xdp.o");
    stdout_ok(&nfkit_in(
        &run_dir,
        &["compile", "--hook", "xdp", &script, "-o", &xdp],
    ));
    let o = upd(&["--switch", "up0", &xdp]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("compiled for hook xdp"),
        "{}",
        stderr(&o)
    );
    // Counted per reason.
    let st = json(&stdout_ok(&nfkit_in(
        &run_dir,
        &["switch", "status", "up0", "--json"],
    )));
    let u = &st["updates"];
    assert_eq!(u["applied"], 5, "{st}");
    assert_eq!(u["refused"], 6, "{st}");
    for (reason, n) in [
        ("unknown_key", 1),
        ("unauthenticated", 1),
        ("downgrade", 1),
        ("forged", 1),
        ("wrong_target", 1),
        ("rejected", 1),
    ] {
        assert_eq!(u["reasons"][reason], n, "{reason}: {st}");
    }
    assert_eq!(st["version"], 8);
    let text = stdout_ok(&nfkit_in(&run_dir, &["switch", "status", "up0"]));
    assert!(
        text.contains("updates: 5 applied, 6 refused") && text.contains("pre at version 8"),
        "{text}"
    );
    stdout_ok(&nfkit_in(&run_dir, &["switch", "stop", "up0"]));
    let o = std::mem::replace(
        &mut child.0,
        Command::new("true").spawn().expect("placeholder"),
    )
    .wait_with_output()
    .expect("switch output");
    assert!(o.status.success());
    let log = stderr(&o);
    for reason in [
        "unauthenticated",
        "downgrade",
        "forged",
        "wrong_target",
        "rejected",
    ] {
        assert!(
            log.contains(&format!("refused ({reason})")),
            "{reason}: {log}"
        );
    }
    assert!(
        log.contains("from udp 127.0.0.1:") && log.contains("from tcp 127.0.0.1:"),
        "{log}"
    );
}
