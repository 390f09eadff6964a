//! The CLI through nfkitd over TCP with mutual TLS: certificates from
//! `nfkit daemon certs`, the daemon listening on 127.0.0.1 (a port the
//! kernel picks) beside its socket; deploy, status, map edits, swap and
//! undeploy on a namespace testbed (`dmt` names) print the same over
//! TLS with a deploy-role certificate as over the Unix socket; a
//! read-only certificate reads but may not change; `daemon status` and
//! `graph --deployed` work over TLS. Needs root.

mod common;
use common::daemon_cli::{self, Conn, DEPLOY, MAP_GET_JSON, MAP_SET, SWAP, UNDEPLOY};
use common::{is_root, script, Bed, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a command reaches the daemon: NFKIT_DAEMON and the TLS files.
struct Via {
    daemon: String,
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

impl Via {
    fn conn(&self) -> Conn {
        let mut c = Conn::daemon(&self.daemon);
        if let Some((ca, cert, key)) = &self.tls {
            let text = |p: &PathBuf| Some(p.to_string_lossy().into_owned());
            c.0 = vec![
                ("NFKIT_DAEMON", Some(self.daemon.clone())),
                ("NFKIT_DAEMON_CA", text(ca)),
                ("NFKIT_DAEMON_CERT", text(cert)),
                ("NFKIT_DAEMON_KEY", text(key)),
            ];
        }
        c
    }
}

/// `nfkit ARGS` with the scratch paths; (exit code, stdout, stderr).
fn nfkit(s: &Scratch, run: &Path, via: &Via, args: &[&str]) -> (i32, String, String) {
    daemon_cli::nfkit(s, run, &via.conn(), args)
}

/// The shared scenario over `via`; the daemon's generation varies too.
fn scenario(s: &Scratch, run: &Path, via: &Via, bed: &Bed) -> Vec<String> {
    daemon_cli::scenario(s, run, &via.conn(), bed, &["generation"])
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
    assert!(
        over_unix[DEPLOY].contains("exit 0"),
        "{}",
        over_unix[DEPLOY]
    );
    assert!(
        over_unix[MAP_SET].contains("exit 0"),
        "{}",
        over_unix[MAP_SET]
    );
    assert!(
        over_unix[MAP_GET_JSON].contains("42"),
        "{}",
        over_unix[MAP_GET_JSON]
    );
    assert!(over_unix[SWAP].contains("swapped"), "{}", over_unix[SWAP]);
    assert!(
        over_unix[UNDEPLOY].contains("exit 0"),
        "{}",
        over_unix[UNDEPLOY]
    );
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
    let at = daemon_cli::xdp_at(&bed);
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
