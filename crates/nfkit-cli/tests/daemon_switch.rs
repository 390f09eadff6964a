//! Issue 18, scope 2 for switches: `nfkit switch map|trace|update|rekey`
//! and `nfkit map ... --switch NAME` go through nfkitd when one runs
//! (SwitchService QuerySwitch, ChangeSwitch, RekeySwitch) and print what
//! they print directly; a signed update is forwarded as it is signed;
//! reads need the read-only role, changes deploy, rekey admin; every
//! change is in the audit log. Needs root (tap ports, other uids).

mod common;
use common::{examples, is_root, json, Dir};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NFKIT: &str = env!("CARGO_BIN_EXE_nfkit");
/// The switch with a key (pcap input, kept running) and the one started
/// by `switch start` on a tap port (through nfkitd in the second run).
const KEYED: &str = "dmnk";
const PLAIN: &str = "dmnp";

/// `nfkit ARGS` in run directory `run`, NFKIT_DAEMON `daemon`, as `uid`
/// when given; (exit code, stdout, stderr).
fn nfkit(run: &str, daemon: &str, uid: Option<u32>, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(NFKIT);
    cmd.args(args)
        .env("NFKIT_RUN_DIR", run)
        .env("NFKIT_DAEMON", daemon);
    if let Some(u) = uid {
        cmd.uid(u).gid(u);
    }
    let o = cmd.output().expect("run nfkit");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Timings and uptimes vary between runs: left out of JSON.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in ["total", "verify", "load", "switch", "uptime_s", "latency"] {
                m.remove(k);
            }
            m.values_mut().for_each(scrub);
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
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

/// The keyed switch, directly in the shared run directory, once it has
/// replayed its pcap input.
fn start_keyed(run: &str, keys: &str, script: &str, pcap: &str) -> Child {
    let port = format!("p1:pcap={pcap}");
    let ctl = format!("{run}/../ctl.pcap");
    let child = Child(
        Command::new(NFKIT)
            .args([
                "switch",
                "run",
                "--name",
                KEYED,
                "--no-pin",
                "--linger",
                "--key",
                keys,
                "--controller",
                &ctl,
                "--port",
                &port,
                script,
            ])
            .env("NFKIT_RUN_DIR", run)
            .env("NFKIT_DAEMON", "off")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the switch"),
    );
    let frames = nfkit_pcap::read_file(pcap).expect("pcap").len() as u64;
    let t = Instant::now();
    loop {
        assert!(t.elapsed().as_secs() < 60, "switch {KEYED} did not start");
        let (code, o, _) = nfkit(run, "off", None, &["switch", "status", KEYED, "--json"]);
        if code == 0 && json(&o)["ports"][0]["rx"].as_u64() == Some(frames) {
            return child;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The commands, directly (`daemon` "off") or through nfkitd; every
/// output, scrubbed.
fn scenario(run: &str, daemon: &str, files: &Files) -> Vec<String> {
    let mut keyed = start_keyed(run, &files.keys, &files.script, &files.pcap);
    let tap = format!("{PLAIN}0:tap");
    let (code, o, e) = nfkit(
        run,
        daemon,
        None,
        &[
            "switch",
            "start",
            "--name",
            PLAIN,
            "--port",
            &tap,
            "--no-pin",
            &files.script,
        ],
    );
    assert_eq!(code, 0, "switch start ({daemon}): {o}{e}");
    let keys = files.keys.as_str();
    let steps: Vec<Vec<&str>> = vec![
        vec!["switch", "map", KEYED, "blocked", "--json"],
        vec!["switch", "map", KEYED, "packets"],
        vec!["switch", "map", KEYED, "nope"],
        vec!["map", "list", "--switch", KEYED],
        vec!["map", "list", "--switch", KEYED, "--json"],
        vec!["map", "dump", "bytes_", "--switch", KEYED, "--json"],
        vec!["map", "get", "blocked", "53", "--switch", KEYED],
        // Refused by the keyed switch: writes are signed updates there.
        vec!["map", "set", "blocked", "8080", "3", "--switch", KEYED],
        vec![
            "switch", "update", "--switch", KEYED, "--set", "blocked", "901f", "03", "--key", keys,
            "--json",
        ],
        vec!["map", "get", "blocked", "8080", "--switch", KEYED, "--json"],
        vec![
            "switch", "update", "--switch", KEYED, "--delete", "blocked", "901f", "--key", keys,
        ],
        vec!["map", "get", "blocked", "8080", "--switch", KEYED],
        // A stale version: refused by the switch, nothing changes.
        vec![
            "switch",
            "update",
            "--switch",
            KEYED,
            "--set",
            "blocked",
            "01",
            "01",
            "--key",
            keys,
            "--version",
            "1",
        ],
        vec!["switch", "rekey", KEYED],
        vec!["switch", "trace", KEYED, "--all", "--count", "2", "--json"],
        vec!["switch", "trace", KEYED, "--all", "--count", "1"],
        vec!["map", "set", "blocked", "8080", "4", "--switch", PLAIN],
        vec!["map", "get", "blocked", "8080", "--switch", PLAIN, "--json"],
        vec!["map", "delete", "blocked", "8080", "--switch", PLAIN],
        vec!["switch", "map", PLAIN, "blocked", "--json"],
        vec!["map", "list", "--switch", PLAIN],
        vec!["switch", "rekey", PLAIN],
    ];
    let mut out = Vec::new();
    for args in steps {
        let (code, o, e) = nfkit(run, daemon, None, &args);
        let o = match serde_json::from_str::<Value>(&o) {
            Ok(mut v) => {
                scrub(&mut v);
                serde_json::to_string_pretty(&v).expect("json")
            }
            Err(_) => o
                .lines()
                .map(|l| l.split(" (").next().unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        out.push(format!("$ {args:?}\nexit {code}\n{o}\nstderr: {e}"));
    }
    for name in [KEYED, PLAIN] {
        let (code, o, e) = nfkit(run, daemon, None, &["switch", "stop", name]);
        assert_eq!(code, 0, "switch stop {name}: {o}{e}");
    }
    assert!(keyed.0.wait().expect("wait").success());
    out
}

struct Files {
    keys: String,
    script: String,
    pcap: String,
}

/// Stops the daemon (by pid) when the test ends, also early.
struct Daemon(u32);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.to_string()).output();
    }
}

#[test]
fn daemon_switch_commands_print_what_they_print_directly() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let d = Dir::new("daemon-sw");
    std::fs::set_permissions(&d.0, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let run = d.path("run");
    let keys = d.path("keys");
    let (code, o, e) = nfkit(&run, "off", None, &["switch", "keygen", &keys]);
    assert_eq!(code, 0, "{o}{e}");
    let script = d.path("stats.py");
    let src = std::fs::read_to_string(examples().join("port_stats.py")).expect("example");
    std::fs::write(
        &script,
        src.replace(
            "    port: u16 = Packet.dport\n",
            "    port: u16 = Packet.dport\n    if port == 80:\n        return CONTROLLER(7)\n",
        ),
    )
    .expect("script");
    let files = Files {
        keys,
        script,
        pcap: examples().join("port_stats.pcap").display().to_string(),
    };
    let direct = scenario(&run, "off", &files);
    let expect = [
        (0, "exit 0\n[\n  {\n    \"key\": 53"),
        (2, "exit 1"),
        (6, "exit 0\n2\n"),
        (7, "authenticated writes only"),
        (9, "\"value\": 3"),
        (11, "no such key 8080"),
        (12, "exit 1"),
        (13, "exit 0\nswitch dmnk: key ids now [1]"),
        (14, "\"reason\":7"),
        (17, "\"value\": 4"),
        (21, "exit 1"),
    ];
    for (i, want) in expect {
        assert!(direct[i].contains(want), "step {i}: {}", direct[i]);
    }

    // nfkitd on the same run directory: its socket open to the test's
    // other uids, one role each.
    let cfg = d.path("nfkitd.toml");
    std::fs::write(
        &cfg,
        format!(
            "run_dir = {run:?}\ndata_dir = {:?}\nswitch_dir = {run:?}\nnfkit = {NFKIT:?}\n\
             socket_mode = 0o666\n[roles]\nadmin = {{ uids = [0] }}\n\
             deploy = {{ uids = [65533] }}\nread_only = {{ uids = [65534] }}\n",
            d.path("data")
        ),
    )
    .expect("config");
    let (code, o, e) = nfkit(&run, "", None, &["daemon", "start", "--config", &cfg]);
    assert_eq!(code, 0, "{o}{e}");
    let sock = format!("{run}/nfkitd.sock");
    // The other uids reach the socket in it.
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let (_, o, _) = nfkit(&run, &sock, None, &["daemon", "status", "--json"]);
    let _daemon = Daemon(json(&o)["pid"].as_u64().expect("pid") as u32);
    let via = scenario(&run, &sock, &files);
    for (a, b) in direct.iter().zip(&via) {
        assert_eq!(a, b, "direct vs through nfkitd");
    }

    let audit_path = format!("{}/audit.log", d.path("data"));
    let audit: Vec<Value> = std::fs::read_to_string(&audit_path)
        .expect("audit")
        .lines()
        .map(json)
        .collect();
    let of = |rpc: &str| -> Vec<&Value> {
        audit
            .iter()
            .filter(|l| l["rpc"] == format!("nfkit.v1.SwitchService/{rpc}"))
            .collect()
    };
    // map set (refused by the switch), 3 updates, set + delete on PLAIN.
    let changes = of("ChangeSwitch");
    assert_eq!(changes.len(), 6, "{changes:?}");
    let updates: Vec<_> = changes
        .iter()
        .filter(|l| l["target"] == format!("switch {KEYED} update"))
        .collect();
    assert_eq!(updates.len(), 3, "{changes:?}");
    assert!(
        updates.iter().all(|l| l["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:"))),
        "{updates:?}"
    );
    assert_eq!(
        updates.iter().filter(|l| l["result"] == "ok").count(),
        2,
        "{updates:?}"
    );
    assert!(
        changes
            .iter()
            .any(|l| l["target"] == format!("switch {KEYED} map_set blocked")
                && l["result"] == "failed"),
        "{changes:?}"
    );
    let rekeys = of("RekeySwitch");
    assert_eq!(rekeys.len(), 2, "{rekeys:?}");
    assert!(rekeys.iter().any(|l| l["result"] == "ok"), "{rekeys:?}");
    // Reads are not audited.
    assert!(of("QuerySwitch").is_empty());

    // Roles: reads for read-only, map writes for deploy, rekey for admin.
    let mut keyed = start_keyed(&run, &files.keys, &files.script, &files.pcap);
    let ro = Some(65534);
    let dep = Some(65533);
    let (code, o, e) = nfkit(
        &run,
        &sock,
        ro,
        &["map", "get", "blocked", "53", "--switch", KEYED],
    );
    assert_eq!((code, o.trim()), (0, "2"), "{e}");
    let (code, _, e) = nfkit(
        &run,
        &sock,
        ro,
        &["map", "delete", "blocked", "53", "--switch", KEYED],
    );
    assert_eq!(code, 1);
    assert!(e.contains("ChangeSwitch needs role deploy"), "{e}");
    // The read-only user's own copy of the key: signed, still refused.
    let ro_keys = d.path("ro-keys");
    std::fs::copy(&files.keys, &ro_keys).expect("copy keys");
    std::os::unix::fs::chown(&ro_keys, Some(65534), Some(65534)).expect("chown");
    let (code, _, e) = nfkit(
        &run,
        &sock,
        ro,
        &[
            "switch", "update", "--switch", KEYED, "--set", "blocked", "01", "01", "--key",
            &ro_keys,
        ],
    );
    assert_eq!(code, 1);
    assert!(e.contains("ChangeSwitch needs role deploy"), "{e}");
    let (code, _, e) = nfkit(&run, &sock, dep, &["switch", "rekey", KEYED]);
    assert_eq!(code, 1);
    assert!(e.contains("RekeySwitch needs role admin"), "{e}");
    let (code, o, e) = nfkit(
        &run,
        &sock,
        ro,
        &["switch", "trace", KEYED, "--all", "--count", "1"],
    );
    assert_eq!(code, 0, "{o}{e}");
    // Malformed requests from a client: refused, nothing sent.
    {
        use nfkit_daemon::proto::{
            switch_service_client::SwitchServiceClient, SwitchControlRequest,
        };
        let c = nfkit_daemon::Client::connect(std::path::Path::new(&sock)).expect("connect");
        for (rpc, name, req) in [
            (
                "query",
                KEYED,
                r#"{"op":"map_set","map":"blocked","key":"1","value":"1"}"#,
            ),
            ("query", KEYED, r#"{"op":"stop"}"#),
            ("change", KEYED, r#"{"op":"reload","script":"/etc/passwd"}"#),
            ("change", KEYED, "not json"),
            (
                "change",
                "../x",
                r#"{"op":"map_delete","map":"blocked","key":"53"}"#,
            ),
        ] {
            let mut svc = SwitchServiceClient::new(c.channel());
            let r = SwitchControlRequest {
                name: name.into(),
                request_json: req.into(),
            };
            let res = match rpc {
                "query" => c.block_on(svc.query_switch(r)).map(|_| ()),
                _ => c.block_on(svc.change_switch(r)).map(|_| ()),
            };
            let st = res.expect_err(req);
            assert_eq!(st.code(), tonic::Code::InvalidArgument, "{req}: {st:?}");
        }
    }
    let (_, o, _) = nfkit(
        &run,
        &sock,
        None,
        &["map", "get", "blocked", "53", "--switch", KEYED],
    );
    assert_eq!(o.trim(), "2", "the refusals changed nothing");
    let audit = std::fs::read_to_string(&audit_path).expect("audit");
    let refused = |rpc: &str, uid: u32| {
        audit
            .lines()
            .map(json)
            .filter(|l| {
                l["rpc"] == format!("nfkit.v1.SwitchService/{rpc}")
                    && l["result"] == "refused"
                    && l["who"]["uid"] == uid
            })
            .count()
    };
    assert_eq!(refused("ChangeSwitch", 65534), 2, "{audit}");
    assert_eq!(refused("RekeySwitch", 65533), 1, "{audit}");
    assert_eq!(refused("ChangeSwitch", 0), 3, "{audit}");
    assert_eq!(refused("QuerySwitch", 0), 2, "{audit}");
    let (code, o, e) = nfkit(&run, &sock, None, &["switch", "stop", KEYED]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(keyed.0.wait().expect("wait").success());
}

#[test]
fn daemon_switch_a_keyed_switch_started_through_nfkitd_takes_signed_updates() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    const NAME: &str = "dmnq";
    let d = Dir::new("daemon-swkey");
    let run = d.path("run");
    let keys = d.path("keys");
    let (code, o, e) = nfkit(&run, "off", None, &["switch", "keygen", &keys]);
    assert_eq!(code, 0, "{o}{e}");
    let open_keys = d.path("open-keys");
    std::fs::copy(&keys, &open_keys).expect("copy keys");
    std::fs::set_permissions(
        &open_keys,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .expect("chmod");
    let script = examples().join("port_stats.py").display().to_string();
    let cfg = d.path("nfkitd.toml");
    std::fs::write(
        &cfg,
        format!(
            "run_dir = {run:?}\ndata_dir = {:?}\nswitch_dir = {run:?}\nnfkit = {NFKIT:?}\n",
            d.path("data")
        ),
    )
    .expect("config");
    let (code, o, e) = nfkit(&run, "", None, &["daemon", "start", "--config", &cfg]);
    assert_eq!(code, 0, "{o}{e}");
    let sock = format!("{run}/nfkitd.sock");
    let (_, o, _) = nfkit(&run, &sock, None, &["daemon", "status", "--json"]);
    let _daemon = Daemon(json(&o)["pid"].as_u64().expect("pid") as u32);
    let tap = format!("{NAME}0:tap");
    let start = |key: &str| {
        nfkit(
            &run,
            &sock,
            None,
            &[
                "switch", "start", "--name", NAME, "--port", &tap, "--no-pin", "--key", key,
                &script,
            ],
        )
    };
    // A key file others may read: refused by nfkitd, nothing started.
    let (code, o, e) = start(&open_keys);
    assert_eq!(code, 1, "{o}{e}");
    assert!(e.contains("readable or writable by group or others"), "{e}");
    let (code, o, e) = nfkit(&run, &sock, None, &["switch", "status", NAME]);
    assert_ne!(code, 0, "nothing started: {o}{e}");
    let (code, o, e) = start(&keys);
    assert_eq!(code, 0, "{o}{e}");
    let rec = std::fs::read_to_string(format!("{run}/switches.json")).expect("records");
    assert!(rec.contains(&keys), "{rec}");
    // Plain writes refused; a signed update taken, through nfkitd.
    let (code, _, e) = nfkit(
        &run,
        &sock,
        None,
        &["map", "set", "blocked", "8080", "3", "--switch", NAME],
    );
    assert_eq!(code, 1);
    assert!(e.contains("authenticated writes only"), "{e}");
    let (code, o, e) = nfkit(
        &run,
        &sock,
        None,
        &[
            "switch", "update", "--switch", NAME, "--set", "blocked", "901f", "03", "--key", &keys,
        ],
    );
    assert_eq!(code, 0, "{o}{e}");
    let (code, o, e) = nfkit(
        &run,
        &sock,
        None,
        &["map", "get", "blocked", "8080", "--switch", NAME],
    );
    assert_eq!((code, o.trim()), (0, "3"), "{e}");
    let (code, o, e) = nfkit(&run, &sock, None, &["switch", "stop", NAME]);
    assert_eq!(code, 0, "{o}{e}");
}
