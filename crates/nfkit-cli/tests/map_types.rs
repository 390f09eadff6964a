//! Maps of maps through the CLI (nfkit-kernel's `tests/progs/map_in_map.c`):
//! `object show` names each outer map's inner definition and initial
//! slots (text and `--json`); `run --json` (the VM) and `prog test
//! --json` (the kernel) show the outer maps' slots by inner map name and
//! the inner maps' contents, the same on both sides.

mod common;
use common::{compile, is_root, json, Dir, NFKIT};
use serde_json::Value;
use std::process::Command;

/// The object and a pcap of frames steering `mim_array`: slots 0 and 2
/// (inner keys 1 and 3) and the empty slot 1.
fn setup(tag: &str) -> (Dir, String, String) {
    let dir = Dir::new(&format!("cli-{tag}"));
    let obj = dir.0.join("map_in_map.o");
    std::fs::write(&obj, compile("map_in_map")).expect("object");
    let frames: Vec<nfkit_pcap::Packet> = [[0u8, 1, 4], [2, 3, 6], [0, 1, 2], [1, 0, 0]]
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut f = vec![0u8; 60];
            f[..3].copy_from_slice(b);
            f[12] = 0x08;
            nfkit_pcap::Packet::new(i as u64 * 1000, f)
        })
        .collect();
    let pcap = dir.0.join("in.pcap");
    nfkit_pcap::write_file(&pcap, &frames).expect("pcap");
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    (dir, s(&obj), s(&pcap))
}

fn nfkit(args: &[&str]) -> String {
    let o = Command::new(NFKIT).args(args).output().expect("nfkit");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn map<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["maps"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["name"] == name))
        .unwrap_or_else(|| panic!("map {name} in {v}"))
}

#[test]
fn object_show_names_inner_definitions_and_slots() {
    let (_d, obj, _) = setup("show");
    let text = nfkit(&["object", "show", &obj]);
    assert!(
        text.contains(
            "by_slot: maps of struct counters (array key 4 value 8 max_entries 4); \
             slots 0 = counts_a, 2 = counts_b"
        ),
        "{text}"
    );
    assert!(text.contains("by_key: maps of struct flows (hash key 4 value 8 max_entries 8); slots 1 = flows_x, 3 = flows_y"), "{text}");
    let v = json(&nfkit(&["object", "show", "--json", &obj]));
    let inner = &map(&v, "by_key")["inner"];
    assert_eq!(inner["template"]["type"], "hash", "{inner}");
    assert_eq!(
        inner["slots"][1],
        serde_json::json!({"slot": 3, "map": "flows_y"})
    );
}

#[test]
fn run_and_prog_test_show_slots_and_inner_maps() {
    let (_d, obj, pcap) = setup("run");
    let vm = json(&nfkit(&[
        "run",
        &obj,
        "--section",
        "mim_array",
        "--pcap",
        &pcap,
        "--json",
    ]));
    let slots = &map(&vm, "by_slot")["slots"];
    assert_eq!(
        slots,
        &serde_json::json!([
            {"key": "00000000", "map": "counts_a"},
            {"key": "02000000", "map": "counts_b"},
        ]),
        "{vm}"
    );
    // counts_a[1]: (4 + 1) + (2 + 1); counts_b[3]: 6 + 1 (even third
    // bytes: no rewrite).
    let a = &map(&vm, "counts_a")["entries"];
    assert_eq!(a[0]["key"], "01000000", "{a}");
    assert_eq!(a[0]["value"], "0800000000000000", "{a}");
    assert_eq!(
        map(&vm, "counts_b")["entries"][0]["value"],
        "0700000000000000"
    );
    if !is_root() {
        eprintln!("kernel side skipped: needs root");
        return;
    }
    let k = json(&nfkit(&[
        "prog",
        "test",
        &obj,
        "--section",
        "mim_array",
        "--pcap",
        &pcap,
        "--json",
    ]));
    for name in [
        "by_slot",
        "by_key",
        "counts_a",
        "counts_b",
        "counts_spare",
        "flows_x",
    ] {
        let (mv, mk) = (map(&vm, name), map(&k, name));
        assert_eq!(mv, mk, "{name}: VM and kernel differ");
    }
}
