//! `nfkit daemon start|status|stop`, and the deployment commands through
//! nfkitd against the same commands run directly: deploy, live swap,
//! status, map list/set/get/dump/delete, undeploy, nf list, and a user's
//! NF object added (`nf add`) then deployed from a script that imports
//! it, on a namespace testbed (`dmn` names), print the same (ids, times
//! and the NF directory aside). Needs root.

mod common;
use common::daemon_cli::{self, Conn, GET_MISSING, SWAP, WATCH};
use common::{is_root, script, Bed, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const NFKIT: &str = env!("CARGO_BIN_EXE_nfkit");

/// `nfkit ARGS` with the scratch paths and `daemon` as NFKIT_DAEMON
/// (empty: unset); (exit code, stdout, stderr).
fn nfkit(s: &Scratch, run: &Path, daemon: &str, args: &[&str]) -> (i32, String, String) {
    daemon_cli::nfkit(s, run, &Conn::daemon(daemon), args)
}

fn scrub_text(t: &str) -> String {
    daemon_cli::scrub_text(t, &[])
}

/// The shared scenario with `daemon` as NFKIT_DAEMON.
fn scenario(s: &Scratch, run: &Path, daemon: &str, bed: &Bed) -> Vec<String> {
    daemon_cli::scenario(s, run, &Conn::daemon(daemon), bed, &[])
}

#[test]
fn commands_through_the_daemon_print_what_they_print_directly() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-cli");
    let bed = Bed::new("dmn");
    let run = s.dir.join("run");
    let direct = scenario(&s, &run, "off", &bed);
    assert!(direct[0].contains("exit 0"), "{}", direct[0]);
    assert!(direct[SWAP].contains("swapped"), "{}", direct[SWAP]);
    assert!(
        direct[GET_MISSING].contains("exit 1") && direct[GET_MISSING].contains("no such key"),
        "{}",
        direct[GET_MISSING]
    );
    assert!(
        direct[WATCH].contains("exit 0\n0: 0\n1: 0\n2: 42\n3: 0\n--"),
        "{}",
        direct[WATCH]
    );

    // The daemon, on the default socket of the run directory.
    let cfg = daemon_cli::write_config(&s, &run, "");
    let cfgs = cfg.to_str().unwrap();
    let (code, o, e) = nfkit(&s, &run, "", &["daemon", "start", "--config", cfgs]);
    assert_eq!(code, 0, "{o}{e}");
    let stop = daemon_cli::Stopper::new(&s, &run, "");
    let (code, o, _) = nfkit(&s, &run, "", &["daemon", "status", "--json"]);
    assert_eq!(code, 0);
    let st: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(st["caller"]["role"], "admin");
    // NFKIT_DAEMON unset: the default socket answers, so it is used.
    let via = scenario(&s, &run, "", &bed);
    for (a, b) in direct.iter().zip(&via) {
        assert_eq!(a, b, "direct vs through nfkitd");
    }
    let audit = std::fs::read_to_string(s.dir.join("data/audit.log")).unwrap();
    let rpcs: Vec<String> = audit
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["rpc"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        rpcs.iter().filter(|r| r.ends_with("/Deploy")).count(),
        2,
        "{rpcs:?}"
    );
    assert!(rpcs.iter().any(|r| r.ends_with("/Undeploy")));

    // nfkit top --once: the same frame through the daemon and directly.
    let v1 = script("daemon_count_v1.py");
    let dev = bed.dev.as_str();
    let at = daemon_cli::xdp_at(&bed);
    let (code, o, e) = nfkit(
        &s,
        &run,
        "",
        &[&["deploy", v1.to_str().unwrap()][..], &at].concat(),
    );
    assert_eq!(code, 0, "{o}{e}");
    nfkit(&s, &run, "", &["map", "set", "seen", "3", "77"]);
    let mut frames = Vec::new();
    for (daemon, via) in [("", "via nfkitd"), ("off", "direct")] {
        let (code, o, e) = nfkit(&s, &run, daemon, &["top", "--once", "--interval", "200"]);
        assert_eq!(code, 0, "{o}{e}");
        assert!(
            o.contains("nfkit top: 1 deployments, 1 maps") && o.contains(via),
            "{o}"
        );
        assert!(
            o.contains(&format!("map seen on {dev} xdp-generic: top 1 of 1")),
            "{o}"
        );
        let row = o
            .lines()
            .find(|l| l.contains("│3 "))
            .unwrap_or_else(|| panic!("{o}"));
        assert!(row.contains("77"), "{row}");
        frames.push(
            o.lines()
                .skip(1)
                .filter(|l| !l.contains("PASS"))
                .map(str::to_string)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(frames[0], frames[1]);
    nfkit(&s, &run, "", &["undeploy"]);

    // A user's NF object: added to a directory directly, registered with
    // nfkitd through it; listed, and deployed from a script importing it.
    let nfs = user_nfs(&s);
    let obj = nfs.join("mine.o");
    let direct_dir = s.dir.join("my-nfs");
    std::fs::create_dir_all(&direct_dir).unwrap();
    let daemon_dir = s.dir.join("data/nf");
    let user_script = nfs.join("use_mine.py");
    let legacy = nfs.join("legacy_counter.o");
    nfkit_corpus::BpfBuild::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/progs/legacy_counter.c"),
    )
    .out(&legacy)
    .object_file()
    .unwrap_or_else(|e| panic!("{e}"));
    let mut outs = Vec::new();
    for (daemon, dir) in [("off", &direct_dir), ("", &daemon_dir)] {
        let dirs = dir.to_str().unwrap();
        let with_path = |args: &[&str]| {
            let mut cmd = Command::new(NFKIT);
            cmd.args(args)
                .env("NFKIT_PIN_ROOT", s.bpf())
                .env("NFKIT_STATE_DIR", s.state())
                .env("NFKIT_RUN_DIR", &run)
                .env_remove("NFKIT_NF_PATH");
            if daemon == "off" {
                cmd.env("NFKIT_DAEMON", daemon).env("NFKIT_NF_PATH", dirs);
            } else {
                cmd.env_remove("NFKIT_DAEMON");
            }
            let out = cmd.output().expect("run nfkit");
            let text = |b: &[u8]| String::from_utf8_lossy(b).replace(dirs, "<NFDIR>");
            format!(
                "$ {args:?}\nexit {}\n{}\nstderr: {}",
                out.status.code().unwrap_or(-1),
                scrub_text(&text(&out.stdout)),
                scrub_text(&text(&out.stderr))
            )
        };
        let o = obj.to_str().unwrap();
        let mut run_all = vec![
            with_path(&["nf", "add", o, "--hook", "xdp"]),
            with_path(&["nf", "add", o, "--hook", "xdp"]),
            with_path(&["nf", "list"]),
            with_path(&["nf", "show", "mine.my_filter"]),
            with_path(&[&["deploy", user_script.to_str().unwrap()][..], &at].concat()),
            with_path(&["status"]),
            with_path(&["undeploy"]),
        ];
        // A plain eBPF object, deployed as it is.
        let lc = legacy.to_str().unwrap();
        let obj_at = [
            "--dev",
            dev,
            "--netns",
            bed.ns.as_str(),
            "--type",
            "xdp",
            "--section",
            "xdp_counter",
            "--hook",
            "xdp-generic",
        ];
        run_all.push(with_path(&[
            "deploy",
            lc,
            "--dev",
            dev,
            "--section",
            "xdp_counter",
        ]));
        run_all.push(with_path(&[&["deploy", lc][..], &obj_at].concat()));
        run_all.push(with_path(&["status"]));
        run_all.push(with_path(&["map", "list"]));
        run_all.push(with_path(&["undeploy"]));
        // Not an NF object: refused, nothing added.
        run_all.push(with_path(&[
            "nf",
            "add",
            user_script.to_str().unwrap(),
            "--module",
            "bad",
        ]));
        assert!(!dir.join("bad.o").exists());
        outs.push(run_all);
    }
    let direct_nf = &outs[0];
    assert!(
        direct_nf[0].contains("exit 0\nadded NF module mine at <NFDIR>/mine.xdp.o: my_filter"),
        "{}",
        direct_nf[0]
    );
    assert!(direct_nf[1].contains("unchanged:"), "{}", direct_nf[1]);
    assert!(
        direct_nf[2].contains("mine  (<NFDIR>/mine.xdp.o)"),
        "{}",
        direct_nf[2]
    );
    assert!(
        direct_nf[4].contains("exit 0\ndeployed"),
        "{}",
        direct_nf[4]
    );
    assert!(
        direct_nf[7].contains("exit 1") && direct_nf[7].contains("--type"),
        "{}",
        direct_nf[7]
    );
    assert!(
        direct_nf[8].contains("exit 0\ndeployed") && direct_nf[8].contains("legacy_counter.o"),
        "{}",
        direct_nf[8]
    );
    assert!(
        direct_nf[12].contains("exit 1") && direct_nf[12].contains("not an ELF object"),
        "{}",
        direct_nf[12]
    );
    for (a, b) in outs[0].iter().zip(&outs[1]) {
        assert_eq!(a, b, "nf add/list/show/deploy direct vs through nfkitd");
    }
    let audit = std::fs::read_to_string(s.dir.join("data/audit.log")).unwrap();
    assert_eq!(
        audit
            .lines()
            .filter(|l| l.contains("/RegisterNf") && l.contains("\"ok\""))
            .count(),
        2,
        "{audit}"
    );
    assert!(
        audit
            .lines()
            .any(|l| l.contains("/Deploy") && l.contains("sha256:")),
        "{audit}"
    );
    drop(stop);
    let (code, o, _) = nfkit(&s, &run, "", &["daemon", "status"]);
    assert_eq!(code, 3, "{o}");
    assert!(o.contains("not running"));
}

/// The README's XDP filter as a user's NF object (`mine.o`, compiled
/// with clang), and a script that imports it (`use_mine.py`).
fn user_nfs(s: &Scratch) -> PathBuf {
    let dir = s.dir.join("user-src");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("mine.c.txt");
    std::fs::write(
        &src,
        r#"#include "nfkit.h"

NF(my_filter, port)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi || data + 14 > end)
		return NF_ABORTED;
	if (pi->dport == port)
		return NF_DROP;
	return pi->dport;
}
NF_EXPORT(my_filter);
"#,
    )
    .unwrap();
    let arch = Command::new("uname").arg("-m").output().expect("uname");
    let arch = String::from_utf8_lossy(&arch.stdout).trim().to_string();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../nf/include");
    let ok = Command::new(std::env::var("CLANG").unwrap_or_else(|_| "clang".into()))
        .args([
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-mcpu=v3",
            "-DNF_HOOK_XDP",
            "-I",
        ])
        .arg(&include)
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .args(["-x", "c", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(dir.join("mine.o"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "clang");
    std::fs::write(
        dir.join("use_mine.py"),
        "from nf.classify import every_packet\nfrom nf.mine import my_filter\n\ndef main() -> u64:\n    my_filter(53)\n    return PASS\n\nevery_packet(main)\n",
    )
    .unwrap();
    dir
}
