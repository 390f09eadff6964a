//! Failing commands print their error once: no line of stderr holds the
//! same text twice ("X: X", an error whose message embeds its cause and
//! also returns it from `source()`, printed by anyhow's `{:#}` chain),
//! and each still names the file or object it is about.

mod common;
use common::Dir;
use std::process::Command;

/// Runs nfkit (state and pins in `d`), expects failure; its stderr.
fn fails(d: &Dir, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .env("NFKIT_STATE_DIR", d.path("state"))
        .env("NFKIT_PIN_ROOT", d.path("pins"))
        .output()
        .expect("run nfkit");
    assert!(!o.status.success(), "nfkit {args:?} succeeded");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Panics when a line of `stderr` repeats one of its `: `-separated parts.
fn said_once(args: &[&str], stderr: &str) {
    assert!(!stderr.trim().is_empty(), "nfkit {args:?}: no message");
    for line in stderr.lines() {
        let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
        for (i, p) in parts.iter().enumerate() {
            assert!(
                p.is_empty() || !parts[i + 1..].contains(p),
                "nfkit {args:?}: `{p}` twice in: {line}"
            );
        }
    }
}

#[test]
fn errors_print_their_text_once() {
    let d = Dir::new("errors");
    let good = nfkit_corpus::get("xdp_port_filter").expect("corpus").path;
    let bytes = std::fs::read(good).expect("read object");
    let (trunc, junk, pcap) = (d.path("trunc.o"), d.path("junk.pcap"), d.path("in.pcap"));
    std::fs::write(&trunc, &bytes[..300]).expect("write");
    std::fs::write(&junk, b"garbage, not a capture").expect("write");
    let frame = [0u8; 60].to_vec();
    nfkit_pcap::write_file(
        &pcap,
        &[nfkit_pcap::Packet {
            ts_ns: 0,
            data: frame,
        }],
    )
    .expect("pcap");
    let missing = d.path("missing.pcap");
    let no_dir = d.path("no/such/dir/out.pcap");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["object", "show", &trunc], &trunc),
        (vec!["disasm", &trunc], &trunc),
        (vec!["run", &trunc, "--pcap", &pcap], &trunc),
        (vec!["prog", "test", &trunc, "--pcap", &pcap], &trunc),
        (vec!["run", good, "--pcap", &missing], &missing),
        (vec!["run", good, "--pcap", &junk], &junk),
        (vec!["prog", "test", good, "--pcap", &missing], &missing),
        (
            vec!["run", good, "--pcap", &pcap, "--out", &no_dir],
            &no_dir,
        ),
        (vec!["map", "get", "nosuchmap", "1"], "nosuchmap"),
        (
            vec!["send", "--dev", "nfkit-nodev0", "--pcap", &pcap],
            "nfkit-nodev0",
        ),
    ];
    for (args, names) in &cases {
        let err = fails(&d, args);
        said_once(args, &err);
        assert!(
            err.contains(names),
            "nfkit {args:?} does not name {names}: {err}"
        );
    }
}
