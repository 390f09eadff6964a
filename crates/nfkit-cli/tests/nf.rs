//! `nfkit nf list [--json]` and `nfkit nf show NAME`, run as a user runs them.

use std::process::{Command, Output};

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .env_remove("NFKIT_NF_PATH")
        .output()
        .expect("run nfkit")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn nf_list_json_has_every_nf_with_module_args_returns_and_maps() {
    let o = nfkit(&["nf", "list", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let all = v.as_array().expect("array");
    let nfs: Vec<&serde_json::Value> = all.iter().filter(|d| d["kind"] == "nf").collect();
    assert_eq!(nfs.len(), 30);
    assert_eq!(all.len() - nfs.len(), 7, "classifiers");
    let tb = nfs.iter().find(|d| d["name"] == "tb_dst").expect("tb_dst");
    assert_eq!(tb["module"], "nf.meter");
    assert_eq!(tb["symbol"], "nf_tb_dst");
    let args: Vec<&str> = tb["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(args, ["rate", "burst"]);
    assert_eq!(tb["maps"], serde_json::json!(["nf_meter_tb_dst"]));
    assert!(tb["returns"]
        .as_str()
        .unwrap()
        .contains("TB_OUT_OF_PROFILE"));
    assert!(tb["bad"].as_str().unwrap().contains("rate == 0"));
    for d in &nfs {
        assert!(d["module"].as_str().unwrap().starts_with("nf."), "{d}");
        assert!(!d["returns"].as_str().unwrap().is_empty(), "{d}");
        assert!(d["maps"].is_array(), "{d}");
    }
}

#[test]
fn nf_list_text_and_show() {
    let o = nfkit(&["nf", "list"]);
    assert!(o.status.success());
    let text = stdout(&o);
    for needle in [
        "nf.meter",
        "tb_dst(rate, burst)",
        "src_set(op, ttl)",
        "maps: nf_firewall_ct",
        "by_dscp()",
    ] {
        assert!(text.contains(needle), "missing {needle}");
    }
    for name in ["tb_dst", "nf.meter.tb_dst", "meter.tb_dst"] {
        let o = nfkit(&["nf", "show", name]);
        assert!(o.status.success(), "{name}");
        let s = stdout(&o);
        assert!(s.contains("NF nf.meter.tb_dst"), "{s}");
        assert!(s.contains("rate == 0 or burst == 0"), "bad arguments shown");
        assert!(s.contains("disassembly of nf_tb_dst"), "{s}");
        assert!(s.contains("= nf_meter_tb_dst ll"), "relocations named: {s}");
        assert!(s.contains("call 1 ; bpf_map_lookup_elem"), "helpers named");
    }
    let o = nfkit(&["nf", "show", "conntrack", "--hook", "tc"]);
    assert!(stdout(&o).contains("built for tc"));
    let o = nfkit(&["nf", "show", "forward", "--hook", "socket"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not built for hook socket"));
    let o = nfkit(&["nf", "show", "no_such_nf"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no NF called `no_such_nf`"));
}

#[test]
fn nf_path_directories_must_exist_to_be_listed() {
    let o = nfkit(&["nf", "list", "--nf-path", "/nonexistent/nfkit-nf-dir"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/nfkit-nf-dir"));
}
