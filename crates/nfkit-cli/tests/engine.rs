//! The VM's engine on the command line: `nfkit run ... --engine
//! jit|interp` (objects and chain scripts) names the engine that ran in
//! its text and JSON, traced packets say they ran on the interpreter, a
//! bad value is a usage error, and `nfkit prog test --vm` gives the
//! kernel's return value, output packet and maps on both engines.

mod common;
use common::{corpus, json, Dir};

use nfkit_pcap::Packet;
use serde_json::Value;
use std::process::Output;

const ENGINES: [&str; 2] = ["jit", "interp"];

fn nfkit(args: &[&str]) -> Output {
    common::nfkit_plain(args)
}

fn stdout_ok(args: &[&str]) -> String {
    common::stdout_ok(&nfkit(args))
}

fn example(name: &str) -> String {
    common::examples().join(name).display().to_string()
}

/// Ethernet + IPv4 frame of `len` bytes, protocol `proto` (port 53).
fn ipv4(proto: u8, len: usize) -> Vec<u8> {
    common::ipv4(proto, 53, len)
}

/// A frame with the local experimental EtherType's 4-byte tag
/// (`xdp_adjust` strips it and trims the frame to 128 bytes).
fn tagged(len: usize) -> Vec<u8> {
    let mut f = ipv4(17, len);
    f.splice(12..12, [0x88, 0xb5, 0, 7]);
    f
}

fn write_pcap(path: &str, frames: &[Vec<u8>]) {
    let pkts: Vec<Packet> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| Packet::new(1_000_000_000 + i as u64 * 1_000, f.clone()))
        .collect();
    nfkit_pcap::write_file(path, &pkts).expect("write pcap");
}

/// The `engine: ...` line of a text report (exactly one).
fn engine_line(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("engine: ")).collect();
    assert_eq!(lines.len(), 1, "one engine line: {text}");
    lines[0].to_string()
}

/// Checks that a report's JSON and text name the same engine and that
/// it is what `asked` can give: `interp` runs on the interpreter; `jit`
/// on the JIT, or on the interpreter with the JIT's reason for falling
/// back. Returns the engine that ran.
fn check_engine(asked: &str, v: &Value, text: &str) -> String {
    let ran = v["engine"].as_str().expect("engine in JSON").to_string();
    let fallback = v.get("engine_fallback").and_then(Value::as_str);
    let line = engine_line(text);
    match (asked, ran.as_str(), fallback) {
        ("interp", "interp", None) => assert!(line.starts_with("engine: interp"), "{line}"),
        ("jit", "jit", None) => assert!(line.starts_with("engine: jit"), "{line}"),
        ("jit", "interp", Some(why)) => {
            assert!(!why.is_empty());
            let want = format!("engine: interp (JIT fallback: {why})");
            assert!(line.starts_with(&want), "{line} / {want}");
        }
        other => panic!("--engine {asked} reported {other:?}"),
    }
    ran
}

/// A JSON report without its engine fields (what must not depend on the
/// engine).
fn without_engine(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
        o.remove("engine_fallback");
    }
    if let Some(rows) = v.get_mut("results").and_then(Value::as_array_mut) {
        for r in rows {
            if let Some(o) = r.as_object_mut() {
                o.remove("engine");
            }
        }
    }
    v
}

#[test]
fn run_object_reports_the_engine_and_both_agree() {
    let d = Dir::new("engine-run-obj");
    let inp = d.path("in.pcap");
    write_pcap(
        &inp,
        &[ipv4(17, 60), ipv4(6, 80), ipv4(1, 60), vec![1, 2, 3]],
    );
    let mut reports = Vec::new();
    for prog in ["xdp_port_filter", "tc_proto_stats", "xdp_icmp_echo"] {
        let base = [corpus(prog), "--pcap", &inp];
        let mut per_engine = Vec::new();
        for e in ENGINES {
            let args = [&["run"][..], &base, &["--engine", e]].concat();
            let text = stdout_ok(&args);
            let v = json(&stdout_ok(&[&args[..], &["--json"]].concat()));
            let ran = check_engine(e, &v, &text);
            let rows = v["results"].as_array().expect("results");
            assert_eq!(rows.len(), 4, "{prog}");
            for r in rows {
                assert_eq!(r["engine"], ran.as_str(), "{prog} {e}: {r}");
            }
            assert!(v.get("traced_on").is_none(), "{v}");
            per_engine.push(without_engine(v));
        }
        assert_eq!(
            per_engine[0], per_engine[1],
            "{prog}: jit and interp differ"
        );
        reports.push(per_engine.remove(0));
    }
    // The default is the best engine: the JIT on x86-64.
    let default = json(&stdout_ok(&[
        "run",
        corpus("xdp_port_filter"),
        "--pcap",
        &inp,
        "--json",
    ]));
    let jit = json(&stdout_ok(&[
        "run",
        corpus("xdp_port_filter"),
        "--pcap",
        &inp,
        "--json",
        "--engine",
        "jit",
    ]));
    if cfg!(target_arch = "x86_64") {
        assert_eq!(default["engine"], jit["engine"]);
        assert_eq!(default["engine_fallback"], jit["engine_fallback"]);
    }
    assert_eq!(without_engine(default), reports[0]);
}

#[test]
fn run_script_reports_the_engine_and_both_agree() {
    let (script, pcap) = (example("dscp_dispatch.py"), example("dscp_dispatch.pcap"));
    let mut texts = Vec::new();
    let mut values = Vec::new();
    for e in ENGINES {
        let args = ["run", script.as_str(), "--pcap", &pcap, "--engine", e];
        let text = stdout_ok(&args);
        let v = json(&stdout_ok(&[&args[..], &["--json"]].concat()));
        check_engine(e, &v, &text);
        // The report is the same whatever ran it, but for the engine line.
        texts.push(
            text.lines()
                .filter(|l| !l.starts_with("engine: "))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        values.push(without_engine(v));
    }
    assert_eq!(texts[0], texts[1]);
    assert_eq!(values[0], values[1]);
    assert_eq!(values[0]["packets"], 8);
}

#[test]
fn traced_packets_run_on_the_interpreter_and_say_so() {
    let d = Dir::new("engine-trace");
    let inp = d.path("in.pcap");
    write_pcap(&inp, &[ipv4(17, 60), ipv4(6, 80), ipv4(1, 60)]);
    let obj = corpus("xdp_port_filter");
    for e in ENGINES {
        let args = [
            "run",
            obj,
            "--pcap",
            &inp,
            "--engine",
            e,
            "--trace-packets",
            "2",
        ];
        let text = stdout_ok(&args);
        let line = engine_line(&text);
        assert!(
            line.ends_with("; traced packets (1 of 3) run on the interpreter"),
            "{line}"
        );
        let v = json(&stdout_ok(&[&args[..], &["--json"]].concat()));
        assert_eq!(v["traced_on"], "interp");
        let ran = v["engine"].as_str().expect("engine");
        let rows = v["results"].as_array().expect("results");
        let engines: Vec<&str> = rows.iter().filter_map(|r| r["engine"].as_str()).collect();
        assert_eq!(engines, [ran, "interp", ran], "{e}");
        assert!(rows[1]["trace"].as_array().is_some_and(|t| !t.is_empty()));
    }
    // A chain script traced whole.
    let (script, pcap) = (example("dscp_dispatch.py"), example("dscp_dispatch.pcap"));
    let text = stdout_ok(&[
        "run", &script, "--pcap", &pcap, "--trace", "--engine", "jit",
    ]);
    assert!(
        engine_line(&text).ends_with("; traced packets (8 of 8) run on the interpreter"),
        "{text}"
    );
}

#[test]
fn a_bad_engine_is_a_usage_error() {
    let d = Dir::new("engine-bad");
    let inp = d.path("in.pcap");
    write_pcap(&inp, &[ipv4(17, 60)]);
    let obj = corpus("xdp_port_filter");
    let script = example("dscp_dispatch.py");
    for args in [
        vec!["run", obj, "--pcap", &inp, "--engine", "turbo"],
        vec!["run", &script, "--pcap", &inp, "--engine", "turbo"],
        vec![
            "prog", "test", obj, "--pcap", &inp, "--vm", "--engine", "turbo",
        ],
    ] {
        let o = nfkit(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("'turbo'") && err.contains("--engine") && err.contains("jit or interp"),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
    // --engine picks the VM's engine: without --vm it is refused.
    let o = nfkit(&["prog", "test", obj, "--pcap", &inp, "--engine", "jit"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--vm"));
}

/// Per packet: (return value, verdict, output packet, refused).
fn packet_fields(v: &Value) -> Vec<(Value, Value, Value, Value)> {
    v["packets"]
        .as_array()
        .expect("packets")
        .iter()
        .map(|p| {
            assert!(p["ns_per_run"].is_u64() || p["refused"] == true, "{p}");
            (
                p["retval"].clone(),
                p["verdict"].clone(),
                p["out"].clone(),
                p["refused"].clone(),
            )
        })
        .collect()
}

#[test]
fn prog_test_vm_matches_the_kernel() {
    if !common::is_root() {
        eprintln!("skipped: needs root for the kernel's test run");
        return;
    }
    let d = Dir::new("engine-prog-test");
    let inp = d.path("in.pcap");
    write_pcap(
        &inp,
        &[
            ipv4(1, 98),
            ipv4(17, 60),
            tagged(200),
            tagged(60),
            ipv4(6, 80),
        ],
    );
    for prog in [
        "xdp_icmp_echo",
        "xdp_adjust",
        "tc_proto_stats",
        "xdp_port_filter",
    ] {
        // Repeats run on the packet the previous run left, in both.
        for repeat in ["1", "3"] {
            let base = [
                "prog",
                "test",
                corpus(prog),
                "--pcap",
                &inp,
                "--repeat",
                repeat,
            ];
            let kernel = json(&stdout_ok(&[&base[..], &["--json"]].concat()));
            let want = packet_fields(&kernel);
            assert_eq!(want.len(), 5);
            assert!(want.iter().all(|p| p.3 == false), "{prog}: {kernel}");
            for e in ENGINES {
                let args = [&base[..], &["--vm", "--engine", e]].concat();
                let vm = json(&stdout_ok(&[&args[..], &["--json"]].concat()));
                assert_eq!(packet_fields(&vm), want, "{prog} x{repeat} {e}");
                assert_eq!(vm["maps"], kernel["maps"], "{prog} x{repeat} {e}");
                let text = stdout_ok(&args);
                check_engine(e, &vm, &text);
                // The text has the kernel's lines, with the times.
                let lines = |t: &str| -> Vec<String> {
                    t.lines()
                        .filter(|l| !l.starts_with("engine: "))
                        .map(|l| match l.split_once(" ns/run") {
                            Some((head, tail)) => {
                                let head = head.rsplit_once(' ').map_or(head, |h| h.0);
                                format!("{head} _{tail}")
                            }
                            None => l.to_string(),
                        })
                        .collect()
                };
                assert_eq!(
                    lines(&text),
                    lines(&stdout_ok(&base)),
                    "{prog} x{repeat} {e}"
                );
            }
        }
    }
}

#[test]
fn prog_test_vm_runs_chain_scripts() {
    let (script, pcap) = (example("ddos.py"), example("ddos.pcap"));
    let run = json(&stdout_ok(&["run", &script, "--pcap", &pcap, "--json"]));
    let v = json(&stdout_ok(&[
        "prog", "test", &script, "--pcap", &pcap, "--vm", "--json",
    ]));
    let rows = v["packets"].as_array().expect("packets");
    assert_eq!(rows.len() as u64, run["packets"].as_u64().expect("packets"));
    // The packets kept by the chain are the ones `run` writes out.
    let kept = rows.iter().filter(|r| r["kept"] == true).count();
    assert_eq!(kept as u64, run["out_packets"].as_u64().expect("out"));
}
