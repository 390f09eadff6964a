//! The CLI through nfkitd over TCP with mutual TLS: certificates from
//! `nfkit daemon certs`, the daemon listening on 127.0.0.1 (a port the
//! kernel picks) beside its socket; deploy, status, map edits, swap and
//! undeploy on a namespace testbed (`dmt` names) print the same over
//! TLS with a deploy-role certificate as over the Unix socket; a
//! read-only certificate reads but may not change; `daemon status` and
//! `graph --deployed` work over TLS. A certificate revoked with `daemon
//! certs --revoke` is refused once nfkitd reloads (`daemon reload`,
//! SIGHUP) while the other clients, open deployments and traffic go
//! on; a broken CRL changes nothing. Needs root.

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

/// Directly, never through a daemon.
fn off() -> Via {
    Via {
        daemon: "off".into(),
        tls: None,
    }
}

/// Certificates for `clients` in `<scratch>/certs` (`daemon certs`).
fn make_certs(s: &Scratch, run: &Path, clients: &str) -> PathBuf {
    let certs = s.dir.join("certs");
    let (code, o, e) = nfkit(
        s,
        run,
        &off(),
        &[
            "daemon",
            "certs",
            "--out",
            certs.to_str().unwrap(),
            "--clients",
            clients,
        ],
    );
    assert_eq!(code, 0, "{o}{e}");
    for c in clients.split(',') {
        assert!(o.contains(&format!("client {c}:")), "{o}");
    }
    assert!(o.contains("ca.crl (none revoked"), "{o}");
    certs
}

/// Starts nfkitd on its socket and 127.0.0.1 with mutual TLS (`tls`:
/// more `[tls]` keys, `roles`: the `[roles]` table); its socket, its
/// TCP address, and its config file.
fn start_tls(s: &Scratch, run: &Path, certs: &Path, tls: &str, roles: &str) -> (String, String) {
    let cfg = daemon_cli::write_config(
        s,
        run,
        &format!(
            "[tls]\nlisten = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\n{tls}\n\
             [roles]\n{roles}\n",
            certs.join("server.crt"),
            certs.join("server.key"),
            certs.join("ca.crt"),
        ),
    );
    let (code, o, e) = nfkit(
        s,
        run,
        &off(),
        &["daemon", "start", "--config", cfg.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{o}{e}");
    let socket = run.join("nfkitd.sock").to_string_lossy().into_owned();
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
    (socket, addr)
}

/// Client `name`'s files in `certs`: (CA, certificate, key).
fn files(certs: &Path, name: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    Some((
        certs.join("ca.crt"),
        certs.join(format!("{name}.crt")),
        certs.join(format!("{name}.key")),
    ))
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
    let certs = make_certs(&s, &run, "ci,grafana");
    let (socket, addr) = start_tls(
        &s,
        &run,
        &certs,
        "",
        "admin = { uids = [0] }\ndeploy = { names = [\"ci\"] }\nread_only = { names = [\"grafana\"] }",
    );
    let _stop = daemon_cli::Stopper::new(&s, &run, &socket);
    let files = |name: &str| files(&certs, name);
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

/// Sends `n` UDP frames from the bed's peer to its device (the XDP
/// program's side).
fn udp_to(bed: &Bed, n: u64) {
    use nfkit_traffic::send::{send, SendOptions, Source};
    let peer = format!("{}b", bed.dev.trim_end_matches('a'));
    let frame = common::udp_frame(
        "198.18.40.2".parse().unwrap(),
        "198.18.40.1".parse().unwrap(),
        9,
    );
    let opts = SendOptions {
        dev: peer,
        netns: Some(bed.peer_ns.clone()),
        count: Some(n),
        ..SendOptions::default()
    };
    let r = send(&Source::Frames(vec![frame]), &opts).expect("send frames");
    assert_eq!(r.sent, n, "frames sent");
}

/// Waits until `seen[0]` reads `want` over `via` (frames cross the veth
/// asynchronously).
fn wait_seen(s: &Scratch, run: &Path, via: &Via, want: u64) {
    let t0 = Instant::now();
    loop {
        let (code, o, e) = nfkit(s, run, via, &["map", "get", "seen", "0"]);
        assert_eq!(code, 0, "{o}{e}");
        if o.trim() == want.to_string() {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "seen[0] is {o}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until nfkitd's log has a line with all of `words`; that line.
fn log_line(run: &Path, from: usize, words: &[&str]) -> String {
    let t0 = Instant::now();
    loop {
        let log = std::fs::read_to_string(run.join("nfkitd.log")).unwrap_or_default();
        if let Some(l) = log[from.min(log.len())..]
            .lines()
            .find(|l| words.iter().all(|w| l.contains(w)))
        {
            return l.to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no line with {words:?} in: {log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn log_len(run: &Path) -> usize {
    std::fs::metadata(run.join("nfkitd.log")).map_or(0, |m| m.len() as usize)
}

#[test]
fn daemon_tls_a_revoked_certificate_is_refused_after_a_reload_and_a_broken_crl_changes_nothing() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmt-crl");
    let bed = Bed::new("dmr");
    let run = s.dir.join("run");
    let certs = make_certs(&s, &run, "ci,ops");
    let crl = certs.join("ca.crl");
    let (socket, addr) = start_tls(
        &s,
        &run,
        &certs,
        &format!("crl = {crl:?}"),
        "admin = { uids = [0] }\ndeploy = { names = [\"ci\", \"ops\"] }",
    );
    let _stop = daemon_cli::Stopper::new(&s, &run, &socket);
    let unix = Via {
        daemon: socket.clone(),
        tls: None,
    };
    let ci = Via {
        daemon: format!("https://{addr}"),
        tls: files(&certs, "ci"),
    };
    let ops = Via {
        daemon: format!("https://{addr}"),
        tls: files(&certs, "ops"),
    };

    // Before: both served; ci deploys, traffic is counted.
    let v1 = script("daemon_count_v1.py");
    let at = daemon_cli::xdp_at(&bed);
    let (code, o, e) = nfkit(
        &s,
        &run,
        &ci,
        &[&["deploy", v1.to_str().unwrap()][..], &at].concat(),
    );
    assert_eq!(code, 0, "{o}{e}");
    let (code, o, e) = nfkit(&s, &run, &ops, &["status"]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(o.contains(&bed.dev), "{o}");
    udp_to(&bed, 10);
    wait_seen(&s, &run, &ops, 10);

    // ops revoked: the CRL lists it; nfkitd refuses it once reloaded.
    let (code, o, e) = nfkit(
        &s,
        &run,
        &off(),
        &[
            "daemon",
            "certs",
            "--out",
            certs.to_str().unwrap(),
            "--revoke",
            "ops",
        ],
    );
    assert_eq!(code, 0, "{o}{e}");
    assert!(o.contains("client ops") && o.contains("revoked"), "{o}");
    let (code, o, e) = nfkit(&s, &run, &ops, &["status"]);
    assert_eq!(code, 0, "not yet reloaded: {o}{e}");
    let (code, o, e) = nfkit(&s, &run, &unix, &["daemon", "reload", "--socket", &socket]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(
        o.contains("reloaded roles and TLS") && o.contains("1 revoked"),
        "{o}"
    );
    let (code, o, e) = nfkit(&s, &run, &ops, &["map", "get", "seen", "0"]);
    assert_eq!(code, 1, "{o}{e}");
    assert!(
        e.contains("client certificate refused") && e.contains("revoked"),
        "{e}"
    );
    // ci is still served, and the deployment made before still counts.
    udp_to(&bed, 5);
    wait_seen(&s, &run, &ci, 15);
    let (code, o, e) = nfkit(&s, &run, &ci, &["status"]);
    assert_eq!(code, 0, "{o}{e}");
    assert!(o.contains(&bed.dev), "{o}");

    // A broken CRL: the reload is refused, naming the file; the old one
    // stays in force (ops still refused, ci still served).
    let good = std::fs::read_to_string(&crl).unwrap();
    std::fs::write(
        &crl,
        "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n",
    )
    .unwrap();
    let (code, o, e) = nfkit(&s, &run, &unix, &["daemon", "reload", "--socket", &socket]);
    assert_eq!(code, 1, "{o}{e}");
    assert!(
        e.contains("reload refused") && e.contains("ca.crl") && e.contains("not a CRL"),
        "{e}"
    );
    let (code, _, e) = nfkit(&s, &run, &ops, &["status"]);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains("revoked"), "{e}");
    wait_seen(&s, &run, &ci, 15);

    // SIGHUP does the same: refused while the file is broken, then
    // taken once it is good again.
    let (code, o, e) = nfkit(
        &s,
        &run,
        &unix,
        &["daemon", "status", "--json", "--socket", &socket],
    );
    assert_eq!(code, 0, "{o}{e}");
    let pid = serde_json::from_str::<Value>(&o).unwrap()["pid"]
        .as_u64()
        .unwrap();
    let hup = |from| {
        let ok = std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -HUP {pid}");
        from
    };
    let l = log_line(
        &run,
        hup(log_len(&run)),
        &["SIGHUP: reload refused", "ca.crl"],
    );
    assert!(l.contains("stay in force"), "{l}");
    std::fs::write(&crl, &good).unwrap();
    let l = log_line(&run, hup(log_len(&run)), &["SIGHUP: reloaded"]);
    assert!(l.contains("1 revoked"), "{l}");
    let (code, _, e) = nfkit(&s, &run, &ops, &["status"]);
    assert_eq!(code, 1, "{e}");
    wait_seen(&s, &run, &ci, 15);
    let (code, o, e) = nfkit(&s, &run, &ci, &["undeploy", "--dev", &bed.dev]);
    assert_eq!(code, 0, "{o}{e}");

    // Audited: each reload (by whom, or SIGHUP), each refusal of ops.
    let audit = std::fs::read_to_string(s.dir.join("data/audit.log")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reloads: Vec<(&str, &str, bool)> = lines
        .iter()
        .filter(|l| l["rpc"] == "nfkit.v1.DaemonService/Reload")
        .map(|l| {
            (
                l["target"].as_str().unwrap(),
                l["code"].as_str().unwrap(),
                l["who"]["uid"] == 0,
            )
        })
        .collect();
    assert_eq!(
        reloads,
        [
            ("rpc", "OK", true),
            ("rpc", "FAILED_PRECONDITION", true),
            ("SIGHUP", "FAILED_PRECONDITION", false),
            ("SIGHUP", "OK", false),
        ]
    );
    let refused = lines
        .iter()
        .filter(|l| {
            l["code"] == "UNAUTHENTICATED"
                && l["message"].as_str().is_some_and(|m| m.contains("revoked"))
        })
        .count();
    assert_eq!(refused, 3, "{audit}");
}
