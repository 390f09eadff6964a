//! The CLI scenario that `daemon.rs` (directly vs over nfkitd's Unix
//! socket) and `daemon_tls.rs` (Unix socket vs mutual TLS) run twice and
//! compare: deploy, swap, status, map edits and watch, undeploy, nf
//! list/show, each output with what varies between runs scrubbed.

use super::{script, Bed, Scratch, NFKIT};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the commands reach nfkitd: environment variables set (`Some`)
/// or removed (`None`), over the scratch paths.
pub struct Conn(pub Vec<(&'static str, Option<String>)>);

impl Conn {
    /// NFKIT_DAEMON `daemon` (empty: unset), no TLS files.
    pub fn daemon(daemon: &str) -> Conn {
        let mut v = vec![
            ("NFKIT_DAEMON_CA", None),
            ("NFKIT_DAEMON_CERT", None),
            ("NFKIT_DAEMON_KEY", None),
        ];
        v.push((
            "NFKIT_DAEMON",
            (!daemon.is_empty()).then(|| daemon.to_string()),
        ));
        Conn(v)
    }
}

/// `nfkit ARGS` with the scratch paths over `conn`; (exit code, stdout,
/// stderr).
pub fn nfkit(s: &Scratch, run: &Path, conn: &Conn, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(NFKIT);
    cmd.args(args)
        .env("NFKIT_PIN_ROOT", s.bpf())
        .env("NFKIT_STATE_DIR", s.state())
        .env("NFKIT_RUN_DIR", run);
    for (k, v) in &conn.0 {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().expect("run nfkit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Ids, times and counters (and the `extra` keys) left out of JSON.
pub fn scrub(v: &mut Value, extra: &[&str]) {
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
            ]
            .iter()
            .chain(extra)
            {
                m.remove(*k);
            }
            m.values_mut().for_each(|v| scrub(v, extra));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| scrub(v, extra)),
        _ => {}
    }
}

/// Text without the timing lines, the number after `link`, `prog` (and
/// the `extra` words) as `N`.
pub fn scrub_text(t: &str, extra: &[&str]) -> String {
    t.lines()
        .filter(|l| {
            !l.trim_start().starts_with("load+attach") && !l.trim_start().starts_with("chain ")
        })
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            w.iter()
                .enumerate()
                .map(|(i, x)| {
                    if i > 0 && (matches!(w[i - 1], "link" | "prog") || extra.contains(&w[i - 1])) {
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

/// Step numbers of [`scenario`] that the tests check.
pub const DEPLOY: usize = 0;
pub const MAP_SET: usize = 3;
pub const MAP_GET_JSON: usize = 4;
pub const SWAP: usize = 6;
pub const GET_MISSING: usize = 9;
pub const WATCH: usize = 10;
pub const UNDEPLOY: usize = 14;

/// The arguments that name the test program's attachment on `bed`.
pub fn xdp_at(bed: &Bed) -> [&str; 6] {
    [
        "--dev",
        bed.dev.as_str(),
        "--netns",
        bed.ns.as_str(),
        "--hook",
        "xdp-generic",
    ]
}

/// The scenario on `bed` over `conn`; every output, scrubbed (`extra`:
/// more keys and words to leave out).
pub fn scenario(s: &Scratch, run: &Path, conn: &Conn, bed: &Bed, extra: &[&str]) -> Vec<String> {
    let v1 = script("daemon_count_v1.py");
    let v2 = script("daemon_count_v2.py");
    let (v1, v2) = (v1.to_str().unwrap(), v2.to_str().unwrap());
    let dev = bed.dev.as_str();
    let at = xdp_at(bed);
    let steps: Vec<Vec<&str>> = vec![
        [&["deploy", v1][..], &at, &["--json"]].concat(),
        vec!["status", "--json"],
        vec!["map", "list", "--json"],
        vec!["map", "set", "seen", "2", "42"],
        vec!["map", "get", "seen", "2", "--json"],
        vec!["map", "get", "seen", "2"],
        [&["deploy", v2][..], &at].concat(),
        vec!["map", "dump", "seen", "--json"],
        vec!["map", "dump", "seen", "--dev", dev, "--hook", "xdp-generic"],
        vec!["map", "get", "seen", "9"],
        vec!["map", "watch", "seen", "--count", "1"],
        vec!["map", "watch", "seen", "--count", "1", "--json"],
        vec!["map", "set", "seen", "zero", "1"],
        vec!["status"],
        vec!["undeploy", "--dev", dev],
        vec!["status"],
        vec!["nf", "list"],
        vec!["nf", "list", "--json"],
        vec!["nf", "show", "tb_dst"],
    ];
    steps
        .iter()
        .map(|args| {
            let (code, o, e) = nfkit(s, run, conn, args);
            let o = match serde_json::from_str::<Value>(&o) {
                Ok(mut v) => {
                    scrub(&mut v, extra);
                    serde_json::to_string_pretty(&v).unwrap()
                }
                Err(_) => scrub_text(&o, extra),
            };
            format!(
                "$ {args:?}\nexit {code}\n{o}\nstderr: {}",
                scrub_text(&e, extra)
            )
        })
        .collect()
}

/// Writes `nfkitd.toml` in the scratch directory: nfkitd's run, data,
/// pin and state directories over the scratch paths, then `extra`
/// (more sections); returns its path.
pub fn write_config(s: &Scratch, run: &Path, extra: &str) -> PathBuf {
    let cfg = s.dir.join("nfkitd.toml");
    std::fs::write(
        &cfg,
        format!(
            "run_dir = {run:?}\ndata_dir = {:?}\npin_root = {:?}\nstate_dir = {:?}\n{extra}",
            s.dir.join("data"),
            s.bpf(),
            s.state()
        ),
    )
    .expect("write nfkitd.toml");
    cfg
}

/// Stops the test's daemon (reached at `daemon`, empty: the run
/// directory's socket), also when an assertion fails.
pub struct Stopper<'a> {
    s: &'a Scratch,
    run: &'a Path,
    daemon: String,
}

impl<'a> Stopper<'a> {
    pub fn new(s: &'a Scratch, run: &'a Path, daemon: &str) -> Stopper<'a> {
        Stopper {
            s,
            run,
            daemon: daemon.to_string(),
        }
    }
}

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        let (code, o, e) = nfkit(
            self.s,
            self.run,
            &Conn::daemon(&self.daemon),
            &["daemon", "stop"],
        );
        if code != 0 {
            eprintln!("daemon stop: {o}{e}");
        }
    }
}
