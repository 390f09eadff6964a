//! `nfkit rtl run`: an XDP object on the RTL core gives `nfkit run`'s
//! verdict counts and output packets on an example capture, with the
//! hardware's figures (cycles, CPI, stalls, engines); the DDoS chain runs
//! equal to the VM with its tables sized down, and a chain script whose
//! programs need what the core lacks is refused by name.

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_object::{Image, ProgType};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

const REFLECT: &str = include_str!("../../nfkit-rtl/tests/progs/xdp_reflect.s");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("nfkit-rtl-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .output()
        .expect("run nfkit")
}

fn json_ok(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "nfkit failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON output")
}

#[test]
fn rtl_run_equals_vm_run_on_an_xdp_object() {
    let s = Scratch::new("xdp");
    let insns = assemble(REFLECT, Some(Syntax::Llvm)).expect("assembles");
    let mut image = Image::from_insns("xdp_reflect", ProgType::Xdp, insns);
    image.entries[0].section = "xdp".into();
    let obj = s.path("reflect.o");
    std::fs::write(&obj, nfkit_object::write_object(&image).expect("ELF")).expect("write object");
    let pcap = format!("{EXAMPLES}/ddos.pcap");
    let (vm_out, rtl_out) = (s.path("vm.pcap"), s.path("rtl.pcap"));

    let vm = json_ok(&nfkit(&[
        "run", &obj, "--pcap", &pcap, "--out", &vm_out, "--json",
    ]));
    let rtl = json_ok(&nfkit(&[
        "rtl",
        "run",
        &obj,
        "--pcap",
        &pcap,
        "-o",
        &rtl_out,
        "--engines",
        "2",
        "--json",
        "--check",
    ]));
    assert_eq!(vm["counts"], rtl["counts"], "same verdicts");
    assert_eq!(vm["packets"], rtl["packets"]);
    assert_eq!(rtl["faults"], 0);
    assert_eq!(rtl["vm_check"]["differ"], 0, "--check: {}", rtl["vm_check"]);
    assert_eq!(rtl["vm_check"]["identical"], rtl["packets"]);
    assert_eq!(
        std::fs::read(&vm_out).expect("VM output"),
        std::fs::read(&rtl_out).expect("RTL output"),
        "same packets written"
    );
    let packets = rtl["packets"].as_u64().expect("packet count");
    assert!(packets > 10);
    let cpi = rtl["cpi"].as_f64().expect("cpi");
    assert!(cpi > 1.0 && cpi < 3.0, "CPI {cpi}");
    assert!(rtl["stalls"]["load_use"].as_u64().expect("load-use") > 0);
    let engines = rtl["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 2);
    let split: u64 = engines
        .iter()
        .map(|e| e["packets"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(split, packets, "round-robin over both engines");
    assert!(rtl["switch"]["cycles"].as_u64().expect("switch cycles") > 0);

    // Four engines: port 0 of the switch top, each engine a share.
    let rtl4 = json_ok(&nfkit(&[
        "rtl",
        "run",
        &obj,
        "--pcap",
        &pcap,
        "-o",
        &rtl_out,
        "--engines",
        "4",
        "--json",
        "--check",
    ]));
    assert_eq!(
        vm["counts"], rtl4["counts"],
        "same verdicts on four engines"
    );
    assert_eq!(
        rtl4["vm_check"]["differ"], 0,
        "--check: {}",
        rtl4["vm_check"]
    );
    assert_eq!(
        std::fs::read(&vm_out).expect("VM output"),
        std::fs::read(&rtl_out).expect("RTL output"),
        "same packets written on four engines"
    );
    let engines = rtl4["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 4);
    assert!(
        engines
            .iter()
            .all(|e| e["packets"].as_u64().unwrap_or(0) > 0),
        "every engine ran packets: {engines:?}"
    );
    let copies: u64 = rtl4["switch"]["outputs"]
        .as_object()
        .expect("copies per output")
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        copies, packets,
        "one copy out per packet (the reflector never floods)"
    );
    let e = nfkit(&["rtl", "run", &obj, "--pcap", &pcap, "--engines", "5"]);
    assert!(!e.status.success());
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("4 engines per port"),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );

    // The text report and a VCD of engine 0.
    let vcd = s.path("run.vcd");
    let o = nfkit(&[
        "rtl", "run", &obj, "--pcap", &pcap, "--vcd", &vcd, "--stream", "--check",
    ]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("XDP_TX"), "{text}");
    assert!(text.contains("CPI"), "{text}");
    assert!(text.contains("stall cycles: load-use"), "{text}");
    assert!(text.contains("packet wait"), "{text}");
    assert!(
        text.contains("differ") && text.contains(" 0 differ"),
        "{text}"
    );
    let dump = std::fs::read_to_string(&vcd).expect("VCD written");
    assert!(dump.contains("$enddefinitions") && dump.contains("retire_pc"));
}

#[test]
fn rtl_run_runs_the_ddos_chain_and_refuses_what_the_core_lacks_by_name() {
    let (script, pcap) = (
        format!("{EXAMPLES}/ddos.py"),
        format!("{EXAMPLES}/ddos.pcap"),
    );
    // Its 65536-entry tables exceed the lines: refused, naming the map.
    let o = nfkit(&["rtl", "run", &script, "--pcap", &pcap]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("map `") && err.contains(" entries"), "{err}");
    // Sized down, it runs equal to the VM (examples/ddos.expected).
    let o = nfkit(&[
        "rtl",
        "run",
        &script,
        "--pcap",
        &pcap,
        "--map-lines",
        "128",
        "--check",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("330 packets identical"), "{out}");
    for (verdict, n) in [("XDP_DROP", 248), ("XDP_PASS", 54), ("XDP_REDIRECT", 28)] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [verdict, &n.to_string()]),
            "{verdict} {n}: {out}"
        );
    }
    // On four engines of the switch top, sharing the chain's maps: every
    // engine runs packets, every packet gets a verdict, the legitimate
    // sources' 30 packets all pass and the flooder is still dropped.
    let o = nfkit(&[
        "rtl",
        "run",
        &script,
        "--pcap",
        &pcap,
        "--map-lines",
        "128",
        "--engines",
        "4",
        "--json",
    ]);
    let v = json_ok(&o);
    assert!(v["switch"]["cycles"].as_u64().unwrap_or(0) > 0, "{v}");
    let engines = v["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 4);
    assert!(engines
        .iter()
        .all(|e| e["packets"].as_u64().unwrap_or(0) > 0));
    let counts = &v["counts"];
    let n = |k: &str| counts[k].as_u64().unwrap_or(0);
    assert_eq!(
        n("XDP_DROP") + n("XDP_PASS") + n("XDP_REDIRECT"),
        330,
        "{counts}"
    );
    assert!(n("XDP_PASS") >= 30 && n("XDP_DROP") > 200, "{counts}");
    assert_eq!(v["faults"].as_u64(), Some(0));
    // The DPI NF needs helpers the core lacks: refused by name.
    let dir = Scratch::new("dpi");
    let dpi = dir.path("dpi.py");
    std::fs::write(
        &dpi,
        "from nf.dpi import match\nfrom nf.classify import every_packet\n\ndef c() -> u64:\n    if match(0, 0) == 0:\n        return PASS\n    return DROP\n\nevery_packet(c)\nattach(\"eth0\", \"xdp\")\n",
    )
    .expect("script written");
    let o = nfkit(&["rtl", "run", &dpi, "--pcap", &pcap, "--map-lines", "128"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not in the RTL core's subset"), "{err}");
    assert!(
        err.contains("bpf_xdp_load_bytes") && err.contains("slot "),
        "{err}"
    );
}
