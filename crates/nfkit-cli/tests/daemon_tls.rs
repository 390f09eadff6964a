//! The CLI through nfkitd over TCP with mutual TLS: certificates from
//! `nfkit daemon certs`, the daemon listening on 127.0.0.1 (a port the
//! kernel picks) beside its socket; deploy, status, map edits, swap and
//! undeploy on a namespace testbed (`dmt` names) print the same over
//! TLS with a deploy-role certificate as over the Unix socket; a
//! read-only certificate reads but may not change; `daemon status` and
//! `graph --deployed` work over TLS. Needs root.

mod common;
use common::{is_root, script, Bed, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NFKIT: &str = env!("CARGO_BIN_EXE_nfkit");

/// How a command reaches the daemon: NFKIT_DAEMON and the TLS files.
struct Via {
    daemon: String,
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

/// `nfkit ARGS` with the scratch paths; (exit code, stdout, stderr).
fn nfkit(s: &Scratch, run: &Path, via: &Via, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(NFKIT);
    cmd.args(args)
        .env("NFKIT_PIN_ROOT", s.bpf())
        .env("NFKIT_STATE_DIR", s.state())
        .env("NFKIT_RUN_DIR", run)
        .env("NFKIT_DAEMON", &via.daemon);
    match &via.tls {
        Some((ca, cert, key)) => cmd
            .env("NFKIT_DAEMON_CA", ca)
            .env("NFKIT_DAEMON_CERT", cert)
            .env("NFKIT_DAEMON_KEY", key),
        None => cmd
            .env_remove("NFKIT_DAEMON_CA")
            .env_remove("NFKIT_DAEMON_CERT")
            .env_remove("NFKIT_DAEMON_KEY"),
    };
    let out = cmd.output().expect("run nfkit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Ids and times vary between runs: left out.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in [
                "link_id",
                "prog_id",
                "live_prog_id",
                "deployed_at",
                "load_us",
                "switch_us",
                "verdicts",
                "generation",
            ] {
                m.remove(k);
            }
            m.values_mut().for_each(scrub);
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
}

fn scrub_text(t: &str) -> String {
    t.lines()
        .filter(|l| {
            !l.trim_start().starts_with("load+attach") && !l.trim_start().starts_with("chain ")
        })
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            w.iter()
                .enumerate()
                .map(|(i, x)| {
                    if i > 0 && matches!(w[i - 1], "link" | "prog" | "generation") {
                        "N"
                    } else {
                        x
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The scenario, every output scrubbed.
fn scenario(s: &Scratch, run: &Path, via: &Via, bed: &Bed) -> Vec<String> {
    let v1 = script("daemon_count_v1.py");
    let v2 = script("daemon_count_v2.py");
    let (v1, v2) = (v1.to_str().unwrap(), v2.to_str().unwrap());
    let dev = bed.dev.as_str();
    let at = [
        "--dev",
        dev,
        "--netns",
        bed.ns.as_str(),
        "--hook",
        "xdp-generic",
    ];
    let steps: Vec<Vec<&str>> = vec![
        [&["deploy", v1][..], &at, &["--json"]].concat(),
        vec!["status", "--json"],
        vec!["map", "list", "--json"],
        vec!["map", "set", "seen", "2", "42"],
        vec!["map", "get", "seen", "2", "--json"],
        [&["deploy", v2][..], &at].concat(),
        vec!["map", "dump", "seen", "--json"],
        vec!["map", "get", "seen", "9"],
        vec!["status"],
        vec!["undeploy", "--dev", dev],
        vec!["status"],
    ];
    steps
        .iter()
        .map(|args| {
            let (code, o, e) = nfkit(s, run, via, args);
            let o = match serde_json::from_str::<Value>(&o) {
                Ok(mut v) => {
                    scrub(&mut v);
                    serde_json::to_string_pretty(&v).unwrap()
                }
                Err(_) => scrub_text(&o),
            };
            format!("$ {args:?}\nexit {code}\n{o}\nstderr: {}", scrub_text(&e))
        })
        .collect()
}

/// Stops the test's daemon, also when an assertion fails.
struct Stopper<'a> {
    s: &'a Scratch,
    run: &'a Path,
    socket: String,
}

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        let via = Via {
            daemon: self.socket.clone(),
            tls: None,
        };
        let (code, o, e) = nfkit(self.s, self.run, &via, &["daemon", "stop"]);
        if code != 0 {
            eprintln!("daemon stop: {o}{e}");
        }
    }
}

#[test]
fn the_cli_over_tls_prints_what_it_prints_over_the_socket() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmt-cli");
    let bed = Bed::new("dmt");
    let run = s.dir.join("run");
    let certs = s.dir.join("certs");
    let off = Via {
        daemon: "off".into(),
        tls: None,
    };
    let (code, o, e) = nfkit(
        &s,
        &run,
        &off,
        &[
            "daemon",
            "certs",
            "--out",
            certs.to_str().unwrap(),
            "--clients",
            "ci,grafana",
        ],
    );
    assert_eq!(code, 0, "{o}{e}");
    assert!(
        o.contains("client ci:") && o.contains("client grafana:"),
        "{o}"
    );
    let cfg = s.dir.join("nfkitd.toml");
    std::fs::write(
        &cfg,
        format!(
            "run_dir = {run:?}\ndata_dir = {:?}\npin_root = {:?}\nstate_dir = {:?}\n\
             [tls]\nlisten = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\n\
             [roles]\nadmin = {{ uids = [0] }}\ndeploy = {{ names = [\"ci\"] }}\n\
             read_only = {{ names = [\"grafana\"] }}\n",
            s.dir.join("data"),
            s.bpf(),
            s.state(),
            certs.join("server.crt"),
            certs.join("server.key"),
            certs.join("ca.crt"),
        ),
    )
    .unwrap();
    let (code, o, e) = nfkit(
        &s,
        &run,
        &off,
        &["daemon", "start", "--config", cfg.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{o}{e}");
    let socket = run.join("nfkitd.sock").to_string_lossy().into_owned();
    let _stop = Stopper {
        s: &s,
        run: &run,
        socket: socket.clone(),
    };
    let t0 = Instant::now();
    let addr = loop {
        let log = std::fs::read_to_string(run.join("nfkitd.log")).unwrap_or_default();
        if let Some(l) = log.lines().find(|l| l.contains("serving on tcp:")) {
            break l
                .split("tcp:")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let files = |name: &str| {
        Some((
            certs.join("ca.crt"),
            certs.join(format!("{name}.crt")),
            certs.join(format!("{name}.key")),
        ))
    };
    let unix = Via {
        daemon: socket.clone(),
        tls: None,
    };
    let ci = Via {
        daemon: format!("https://{addr}"),
        tls: files("ci"),
    };
    let graf = Via {
        daemon: format!("tcp:{addr}"),
        tls: files("grafana"),
    };

    let over_unix = scenario(&s, &run, &unix, &bed);
    assert!(over_unix[0].contains("exit 0"), "{}", over_unix[0]);
    assert!(over_unix[3].contains("exit 0"), "{}", over_unix[3]);
    assert!(over_unix[4].contains("42"), "{}", over_unix[4]);
    assert!(over_unix[5].contains("swapped"), "{}", over_unix[5]);
    assert!(over_unix[9].contains("exit 0"), "{}", over_unix[9]);
    let over_tls = scenario(&s, &run, &ci, &bed);
    for (a, b) in over_unix.iter().zip(&over_tls) {
        assert_eq!(a, b, "Unix socket vs TLS");
    }

    // Who the daemon sees over TLS.
    let (code, o, e) = nfkit(&s, &run, &ci, &["daemon", "status", "--socket", &ci.daemon]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(o.contains("you are certificate ci from 127.0.0.1:"), "{o}");
    assert!(o.contains("(deploy)"), "{o}");

    // Read-only: reads, and is refused a change (exit 1, nothing changed).
    let v1 = script("daemon_count_v1.py");
    let at = [
        "--dev",
        bed.dev.as_str(),
        "--netns",
        bed.ns.as_str(),
        "--hook",
        "xdp-generic",
    ];
    let (code, o, e) = nfkit(
        &s,
        &run,
        &ci,
        &[&["deploy", v1.to_str().unwrap()][..], &at].concat(),
    );
    assert_eq!(code, 0, "{o}{e}");
    let (code, o, e) = nfkit(&s, &run, &graf, &["map", "set", "seen", "2", "7"]);
    assert_eq!(code, 1, "{o}{e}");
    assert!(e.contains("needs role deploy"), "{e}");
    let (code, o, _) = nfkit(&s, &run, &graf, &["map", "get", "seen", "2"]);
    assert_eq!(code, 0);
    assert_eq!(o.trim(), "0", "unchanged: {o}");
    let (code, o, e) = nfkit(&s, &run, &graf, &["status", "--json"]);
    assert_eq!(code, 0, "{e}");
    assert!(o.contains(&bed.dev));

    // Without the client files: refused with the reason.
    let anon = Via {
        daemon: format!("https://{addr}"),
        tls: Some((certs.join("ca.crt"), PathBuf::new(), PathBuf::new())),
    };
    let (code, _, e) = nfkit(&s, &run, &anon, &["status"]);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains("no client certificate"), "{e}");

    // The deployed graph, through the daemon over TLS.
    let (code, dot, e) = nfkit(&s, &run, &graf, &["graph", "--deployed"]);
    assert_eq!(code, 0, "{e}");
    assert!(
        dot.starts_with("// nfkit graph --deployed\ndigraph nfkit {"),
        "{dot}"
    );
    assert!(dot.contains("subgraph cluster_0"), "{dot}");
    assert!(
        dot.contains(&format!("{} (netns {}) xdp-generic", bed.dev, bed.ns)),
        "{dot}"
    );
    assert!(dot.contains("map:seen"), "{dot}");
    nfkit(&s, &run, &ci, &["undeploy", "--dev", &bed.dev]);

    // The audit log names the TLS callers.
    let audit = std::fs::read_to_string(s.dir.join("data/audit.log")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines
        .iter()
        .any(|l| l["rpc"] == "nfkit.v1.DeploymentService/Deploy"
            && l["who"]["names"] == serde_json::json!(["ci"])
            && l["result"] == "ok"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["rpc"] == "nfkit.v1.MapService/SetEntry"
                && l["who"]["role"] == "read-only"
                && l["code"] == "PERMISSION_DENIED")
            .count(),
        1
    );
}
