//! `nfkit run SCRIPT --pcap IN [--json]` shows every map of the run
//! typed (docs/abi.md "Map keys and values"): the script's (tuple keys
//! as tuples) and the NF maps of the NFs it links (`nf_maps`), with
//! addresses as addresses and expiry times relative to the last packet.

mod common;
use common::{examples, json, NFKIT};
use serde_json::Value;
use std::process::Command;

/// `nfkit run` of `script` on `pcap`; stdout (panics on failure).
fn run(script: &std::path::Path, pcap: &std::path::Path, extra: &[&str]) -> String {
    let o = Command::new(NFKIT)
        .arg("run")
        .arg(script)
        .arg("--pcap")
        .arg(pcap)
        .args(extra)
        .output()
        .expect("nfkit run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_blacklist_shows_addresses_and_expiry() {
    let ex = examples();
    let (script, pcap) = (ex.join("ddos.py"), ex.join("ddos.pcap"));
    let v = json(&run(&script, &pcap, &["--json"]));
    // The script's own maps keep their shape: integer keys and values.
    assert_eq!(
        v["maps"]["counters"][1],
        serde_json::json!({"key": 1, "value": 248})
    );
    let set = v["nf_maps"]["nf_sets_src"].as_array().expect("nf_sets_src");
    assert_eq!(set.len(), 1, "{v}");
    assert_eq!(set[0]["key"], "198.18.0.66");
    let value = &set[0]["value"];
    let in_s = value["in_s"].as_f64().expect("in_s");
    assert!(
        in_s > 0.0 && in_s <= 10.0,
        "expires within BLACKLIST_NS: {value}"
    );
    assert!(value["ns"].as_u64().is_some(), "{value}");
    let pair = &v["nf_maps"]["nf_meter_tb_srcdst"][0]["key"];
    assert_eq!(pair["src"], "198.18.0.66", "{pair}");
    assert_eq!(pair["dst"], "198.18.1.1", "{pair}");
    assert_eq!(pair["rate"], 20, "{pair}");

    let text = run(&script, &pcap, &[]);
    assert!(text.contains("\nnf maps:\n"), "{text}");
    assert!(
        text.contains("    198.18.0.66: expires in 9.3 s\n"),
        "{text}"
    );
}

const TUPLES: &str = r#"
from nf.classify import every_packet
from nf.sets import src_set, SET_ADD

pairs = HashMap((u32, u16), u64, 64)

def f() -> u64:
    if Packet.ip_version != 4 or Packet.l4_off == 0:
        return PASS
    pairs[(Packet.read_u32(u64(Packet.l3_off) + 12), Packet.dport)] += 1
    src_set(SET_ADD, 0)
    return PASS

every_packet(f)
"#;

#[test]
fn tuple_keys_and_never_expiring_entries() {
    let dir = std::env::temp_dir().join(format!("nfkit-map-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let script = dir.join("pairs.py");
    std::fs::write(&script, TUPLES).expect("script");
    let pcap = examples().join("flow_limiter.pcap");
    let v = json(&run(&script, &pcap, &["--json"]));
    let keys: Vec<Value> = v["maps"]["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    // 198.18.0.1 is 0xC6120001 as `Packet.read_u32` gives it.
    let k = |src: u32, port: u16| serde_json::json!([src, port]);
    assert_eq!(
        keys,
        [k(0xC612_0001, 53), k(0xC612_0002, 53), k(0xC612_0003, 443)]
    );
    let set = v["nf_maps"]["nf_sets_src"].as_array().expect("set");
    assert_eq!(set.len(), 3, "{v}");
    assert_eq!(set[0]["key"], "198.18.0.1");
    assert_eq!(set[0]["value"]["never"], true);
    let text = run(&script, &pcap, &[]);
    assert!(text.contains("    (3323068417, 53): "), "{text}");
    assert!(text.contains("    198.18.0.3: never\n"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
