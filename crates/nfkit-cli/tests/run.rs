//! `nfkit run FILE.o --pcap IN.pcap [--out OUT.pcap] [--trace] [--json]`
//! on corpus programs and small assembled ones, with captures built by
//! nfkit-pcap.

mod common;
use common::{corpus, ipv4, stdout_ok as ok, Dir};

use nfkit_pcap::Packet;
use std::path::Path;
use std::process::{Command, Output};

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .output()
        .expect("run nfkit")
}

fn write_pcap(path: &str, frames: &[Vec<u8>]) -> Vec<Packet> {
    let pkts: Vec<Packet> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| Packet {
            ts_ns: 1_000_000_000 + i as u64 * 1_500,
            data: f.clone(),
        })
        .collect();
    nfkit_pcap::write_file(path, &pkts).expect("write pcap");
    pkts
}

fn read_pcap(path: impl AsRef<Path>) -> Vec<Packet> {
    nfkit_pcap::read_file(path).expect("read pcap")
}

#[test]
fn xdp_verdict_counts_and_passed_packets() {
    let d = Dir::new("run-xdp");
    let (inp, out) = (d.path("in.pcap"), d.path("out.pcap"));
    let mut arp = ipv4(17, 53, 60);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let pkts = write_pcap(
        &inp,
        &[ipv4(17, 53, 60), vec![1, 2, 3], arp, ipv4(6, 80, 80)],
    );
    let text = ok(&nfkit(&[
        "run",
        corpus("xdp_port_filter"),
        "--pcap",
        &inp,
        "--out",
        &out,
    ]));
    assert!(text.contains("on 4 packets"), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
    };
    assert_eq!(line("XDP_PASS").as_deref(), Some("3"), "{text}");
    assert_eq!(line("XDP_ABORTED").as_deref(), Some("1"), "{text}");
    assert_eq!(line("XDP_DROP"), None, "{text}");
    // The passed packets, unchanged, with their timestamps.
    assert_eq!(
        read_pcap(&out),
        vec![pkts[0].clone(), pkts[2].clone(), pkts[3].clone()]
    );
}

fn csum(bytes: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in bytes.chunks(2) {
        s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn xdp_tx_writes_the_modified_packet() {
    let d = Dir::new("run-tx");
    let (inp, out) = (d.path("in.pcap"), d.path("out.pcap"));
    // An ICMP echo request with a correct checksum.
    let mut req = ipv4(1, 0, 74);
    req[34] = 8;
    req[35] = 0;
    req[36..38].copy_from_slice(&[0, 0]);
    req[38..42].copy_from_slice(&[0x12, 0x34, 0, 1]);
    let c = csum(&req[34..]);
    req[36..38].copy_from_slice(&c.to_be_bytes());
    write_pcap(&inp, std::slice::from_ref(&req));
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
        "run",
        corpus("xdp_icmp_echo"),
        "--pcap",
        &inp,
        "--out",
        &out,
        "--json",
    ])))
    .expect("JSON");
    assert_eq!(v["counts"]["XDP_TX"], 1, "{v}");
    assert_eq!(v["written"], 1);
    let got = read_pcap(&out);
    assert_eq!(got.len(), 1);
    let r = &got[0].data;
    assert_eq!(r.len(), req.len());
    assert_eq!(&r[0..6], &req[6..12], "MACs swapped");
    assert_eq!(&r[6..12], &req[0..6]);
    assert_eq!(&r[26..30], &req[30..34], "IPs swapped");
    assert_eq!(&r[30..34], &req[26..30]);
    assert_eq!(r[34], 0, "echo reply");
    assert_eq!(csum(&r[34..]), 0, "ICMP checksum still valid");
}

#[test]
fn tc_and_socket_filter_verdicts() {
    let d = Dir::new("run-tc");
    let (inp, out) = (d.path("in.pcap"), d.path("out.pcap"));
    let frames = [ipv4(6, 80, 200), ipv4(6, 22, 200), ipv4(17, 53, 100)];
    write_pcap(&inp, &frames);
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
        "run",
        corpus("tc_sample_redirect"),
        "--pcap",
        &inp,
        "--json",
    ])))
    .expect("JSON");
    assert_eq!(v["type"], "sched_cls");
    assert_eq!(v["counts"]["TC_ACT_OK"], 3, "{v}");
    // Socket filter: whole TCP/80, TCP/22 cut to 64 bytes of IP, UDP dropped.
    let text = ok(&nfkit(&[
        "run",
        corpus("socket_tcp_port"),
        "--pcap",
        &inp,
        "--out",
        &out,
    ]));
    assert!(text.contains("drop"), "{text}");
    let got = read_pcap(&out);
    assert_eq!(got.len(), 2, "{text}");
    assert_eq!(got[0].data, frames[0]);
    assert_eq!(got[1].data, frames[1][..14 + 64].to_vec());
}

#[test]
fn section_choice_and_tail_calls_from_the_object() {
    let d = Dir::new("run-sec");
    let inp = d.path("in.pcap");
    write_pcap(
        &inp,
        &[ipv4(17, 53, 60), ipv4(17, 53, 100), ipv4(6, 80, 60)],
    );
    let obj = corpus("xdp_tail_dispatch");
    // Several programs: --section is needed, by name or unique section.
    let o = nfkit(&["run", obj, "--pcap", &inp]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("xdp_dispatch"));
    let o = nfkit(&["run", obj, "--pcap", &inp, "--section", "nope"]);
    assert!(!o.status.success());
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
        "run",
        obj,
        "--section",
        "xdp_dispatch",
        "--pcap",
        &inp,
        "--json",
    ])))
    .expect("JSON");
    // UDP below 64 bytes is dropped by the tail-called handler.
    assert_eq!(v["counts"]["XDP_DROP"], 1, "{v}");
    assert_eq!(v["counts"]["XDP_PASS"], 2, "{v}");
}

#[test]
fn trace_chosen_packets() {
    let d = Dir::new("run-trace");
    let inp = d.path("in.pcap");
    write_pcap(
        &inp,
        &[
            ipv4(17, 53, 60),
            vec![0; 10],
            ipv4(17, 80, 60),
            ipv4(17, 81, 60),
        ],
    );
    let obj = corpus("xdp_port_filter");
    let text = ok(&nfkit(&[
        "run",
        obj,
        "--pcap",
        &inp,
        "--trace-packets",
        "2-3",
    ]));
    assert!(!text.contains("packet 1 ("), "{text}");
    assert!(text.contains("packet 2 (10 bytes)"), "{text}");
    assert!(text.contains("packet 3 (60 bytes)"), "{text}");
    assert!(!text.contains("packet 4 ("), "{text}");
    // The first instruction loads data_end into a register: a change shown.
    assert!(text.contains(" -> "), "{text}");
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
        "run", obj, "--pcap", &inp, "--trace", "--json",
    ])))
    .expect("JSON");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 4);
    for r in results {
        let steps = r["trace"].as_array().expect("every packet traced");
        assert_eq!(steps.len() as u64, r["insns"].as_u64().expect("insns"));
        assert!(steps[0]["changes"]
            .as_array()
            .is_some_and(|c| !c.is_empty()));
    }
    let o = nfkit(&["run", obj, "--pcap", &inp, "--trace-packets", "3-1"]);
    assert!(!o.status.success());
}

/// An ELF object with one `prog_type` program `name` assembled from
/// `text` (llvm syntax), written to `dir`.
fn asm_object(d: &Dir, name: &str, prog_type: nfkit_object::ProgType, text: &str) -> String {
    let insns = nfkit_isa::assemble(text, Some(nfkit_isa::Syntax::Llvm)).expect("assembles");
    let image = nfkit_object::Image::from_insns(name, prog_type, insns);
    let path = d.path(&format!("{name}.o"));
    std::fs::write(&path, nfkit_object::write_object(&image).expect("ELF")).expect("write");
    path
}

#[test]
fn tc_codes_named_and_kept_as_the_abi_says() {
    use nfkit_abi::Hook;
    let d = Dir::new("run-tccodes");
    let inp = d.path("in.pcap");
    write_pcap(&inp, &[ipv4(17, 53, 60)]);
    // Every TC code, UNSPEC (-1) and one past the last (9): the name and
    // whether the packet is written agree with nfkit_abi (TC_ACT_STOLEN
    // and TC_ACT_TRAP drop it; TC_ACT_REPEAT and unknown codes pass).
    for code in -1i64..=9 {
        let obj = asm_object(
            &d,
            &format!("tc_code{}", code + 1),
            nfkit_object::ProgType::SchedCls,
            &format!("r0 = {code}\nexit\n"),
        );
        let out = d.path("out.pcap");
        let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
            "run", &obj, "--pcap", &inp, "--out", &out, "--json",
        ])))
        .expect("JSON");
        let name = Hook::Tc.code_name(code);
        let kept = Hook::Tc.keeps_packet(code);
        assert_eq!(v["counts"][&name], 1, "code {code}: {v}");
        let r = &v["results"][0];
        assert_eq!(r["code"], code, "{v}");
        assert_eq!(r["verdict"], name.as_str(), "{v}");
        assert_eq!(r["kept"], kept, "code {code}: {v}");
        assert_eq!(v["written"], u64::from(kept), "code {code}: {v}");
        assert_eq!(read_pcap(&out).len(), usize::from(kept), "code {code}");
        // The kernel gives the same code the same name (BPF_PROG_TEST_RUN).
        if common::is_root() {
            let pkt = d.path("pkt.bin");
            std::fs::write(&pkt, ipv4(17, 53, 60)).expect("write");
            let k: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
                "prog", "test", &obj, "--packet", &pkt, "--json",
            ])))
            .expect("JSON");
            let p = &k["packets"][0];
            assert_eq!(p["verdict"], name.as_str(), "code {code}: {k}");
            assert_eq!(p["kept"], kept, "code {code}: {k}");
        }
    }
}

#[test]
fn trace_shows_pc_disassembly_memory_helpers_and_registers() {
    let d = Dir::new("run-tracefmt");
    let inp = d.path("in.pcap");
    let pkts = write_pcap(&inp, &[ipv4(17, 53, 60)]);
    let obj = asm_object(
        &d,
        "tracer",
        nfkit_object::ProgType::Xdp,
        "r2 = *(u32 *)(r1 + 0)
         r3 = *(u32 *)(r1 + 4)
         r4 = r2
         r4 += 14
         if r4 > r3 goto +5
         r5 = *(u16 *)(r2 + 12)
         *(u64 *)(r10 - 8) = r5
         call 5
         r0 = 2
         exit
         r0 = 1
         exit
        ",
    );
    let text = ok(&nfkit(&["run", &obj, "--pcap", &inp, "--trace"]));
    let line = |pc: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{pc}: ")))
            .unwrap_or_else(|| panic!("no step {pc}:\n{text}"))
            .to_string()
    };
    // The function's label, then per step: pc, disassembly, effects.
    assert!(text.contains("\n  tracer:\n"), "{text}");
    let load = line("5");
    assert!(load.contains("r5 = *(u16 *)(r2 + 12)"), "{load}");
    assert!(load.contains("read packet+12 (2 bytes) = 0x8"), "{load}");
    assert!(load.contains("r5 = 0x8 (was 0x0)"), "{load}");
    let ctx = line("1");
    assert!(ctx.contains("read ctx+4 (4 bytes) = 0x"), "{ctx}");
    let store = line("6");
    assert!(store.contains("*(u64 *)(r10 - 8) = r5"), "{store}");
    assert!(
        store.contains("write stack fp-8 (8 bytes) = 0x8 (was 0x0)"),
        "{store}"
    );
    // bpf_ktime_get_ns reads the packet's capture time.
    let call = line("7");
    let ts = format!("{:#x}", pkts[0].ts_ns);
    assert!(
        call.contains(&format!("bpf_ktime_get_ns returned {ts}")),
        "{call}"
    );
    assert!(call.contains(&format!("r0 = {ts} (was 0x0)")), "{call}");
    assert!(text.contains("-> XDP_PASS (2), 10 instructions"), "{text}");
    for debug in [
        "Some(",
        "None",
        "{ ",
        "RegChange",
        "TraceStep",
        "MemAccess",
        "Insn",
    ] {
        assert!(
            !text.contains(debug),
            "Rust debug syntax `{debug}`:\n{text}"
        );
    }
    // The same in JSON.
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&[
        "run", &obj, "--pcap", &inp, "--trace", "--json",
    ])))
    .expect("JSON");
    let steps = v["results"][0]["trace"].as_array().expect("trace");
    assert_eq!(steps[0]["enters"], "tracer");
    assert_eq!(steps[5]["insn"], "r5 = *(u16 *)(r2 + 12)");
    assert_eq!(
        steps[5]["mem"],
        serde_json::json!({"kind": "read", "region": "packet", "offset": 12, "size": 2, "value": 8, "old": null})
    );
    assert_eq!(steps[6]["mem"]["region"], "stack");
    assert_eq!(steps[6]["mem"]["offset"], -8);
    assert_eq!(steps[7]["helper"]["name"], "bpf_ktime_get_ns");
    assert_eq!(steps[7]["helper"]["ret"], pkts[0].ts_ns);
}

/// `prog test` reports each packet the kernel refuses (a frame under 14
/// bytes; for TC a cut IP header) with its error and runs the others:
/// exit code 3, JSON for every packet.
#[test]
fn prog_test_reports_refused_packets_and_goes_on() {
    if !common::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let d = Dir::new("run-refused");
    let inp = d.path("in.pcap");
    let whole = ipv4(17, 53, 60);
    write_pcap(
        &inp,
        &[whole.clone(), vec![1, 2, 3], whole[..17].to_vec(), whole],
    );
    // XDP: only the 3-byte frame is refused.
    let o = nfkit(&["prog", "test", corpus("xdp_port_filter"), "--pcap", &inp]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("packet 2: refused by the kernel"), "{text}");
    assert!(text.contains("packet 4: XDP_PASS"), "{text}");
    // TC: the cut IP header too; every packet in the JSON.
    let o = nfkit(&[
        "prog",
        "test",
        corpus("tc_proto_stats"),
        "--pcap",
        &inp,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let p = v["packets"].as_array().expect("packets");
    assert_eq!(p.len(), 4, "{v}");
    let refused: Vec<bool> = p.iter().map(|p| p["refused"] == true).collect();
    assert_eq!(refused, [false, true, true, false], "{v}");
    assert!(p[1]["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    assert_eq!(p[3]["verdict"], "TC_ACT_OK", "{v}");
    assert_eq!(v["refused"], 2, "{v}");
    // All packets run: exit code 0.
    write_pcap(&inp, &[ipv4(17, 53, 60)]);
    let o = nfkit(&["prog", "test", corpus("xdp_port_filter"), "--pcap", &inp]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// Compiles C `src` with clang into `d`/`name`.o.
fn clang(d: &Dir, name: &str, src: &str) -> String {
    let (c, o) = (d.path(&format!("{name}.c")), d.path(&format!("{name}.o")));
    std::fs::write(&c, src).expect("write C");
    nfkit_corpus::BpfBuild::new(&c)
        .arg("-mcpu=v3")
        .out(&o)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    o
}

/// Programs in legacy sections (`xdp_foo`, `prog`), which give no type.
const LEGACY: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp_foo")
int foo(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	return data + 100 > end ? XDP_DROP : XDP_PASS;
}
SEC("prog")
int bar(struct __sk_buff *skb)
{
	return skb->len > 100 ? 2 : 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// Verdicts of `nfkit <args> --json` (`run`: per result; `prog test`:
/// per packet).
fn verdicts(args: &[&str]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(args))).expect("JSON");
    let rows = v["results"].as_array().or(v["packets"].as_array());
    rows.expect("rows")
        .iter()
        .map(|r| r["verdict"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn legacy_sections_run_with_an_explicit_type() {
    let d = Dir::new("run-legacy");
    let obj = clang(&d, "legacy", LEGACY);
    let inp = d.path("in.pcap");
    write_pcap(&inp, &[ipv4(17, 53, 60), ipv4(17, 53, 200)]);
    // Without --type: an error naming the section and suggesting --type.
    for cmd in [&["run"][..], &["prog", "test"][..]] {
        let args = [cmd, &[obj.as_str(), "--pcap", &inp, "--section", "foo"]].concat();
        let o = nfkit(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains("xdp_foo") && err.contains("--type"), "{err}");
    }
    // With it: by section or function name, in the VM.
    let xdp = [
        &obj,
        "--pcap",
        &inp,
        "--type",
        "xdp",
        "--section",
        "xdp_foo",
        "--json",
    ];
    let tc = [
        &obj,
        "--pcap",
        &inp,
        "--type",
        "tc",
        "--section",
        "prog",
        "--json",
    ];
    let vm_xdp = verdicts(&[&["run"][..], &xdp].concat());
    assert_eq!(vm_xdp, ["XDP_DROP", "XDP_PASS"]);
    let vm_tc = verdicts(&[&["run"][..], &tc].concat());
    assert_eq!(vm_tc, ["TC_ACT_OK", "TC_ACT_SHOT"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(
        &[&["run"][..], &tc[..5], &["--section", "bar", "--json"]].concat(),
    )))
    .expect("JSON");
    assert_eq!(
        (v["program"].as_str(), v["type"].as_str()),
        (Some("bar"), Some("sched_cls"))
    );
    // And in the kernel, with the same verdicts.
    if common::is_root() {
        assert_eq!(verdicts(&[&["prog", "test"][..], &xdp].concat()), vm_xdp);
        assert_eq!(verdicts(&[&["prog", "test"][..], &tc].concat()), vm_tc);
    }
}

/// Two XDP programs: `fib` calls `bpf_fib_lookup`, which the VM does not
/// model; `plain` calls only helpers it does.
const MIXED_HELPERS: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp")
int fib(struct xdp_md *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	return id ? XDP_TX : XDP_PASS;
}
SEC("xdp.frags")
int plain(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	return data + 100 > end ? XDP_DROP : XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// An unsupported helper in one program of an object does not keep the
/// others from running; running that one names the helper and the program.
#[test]
fn unsupported_helper_refuses_only_the_programs_that_reach_it() {
    let d = Dir::new("run-mixed-helpers");
    let obj = clang(&d, "mixed", MIXED_HELPERS);
    let inp = d.path("in.pcap");
    write_pcap(&inp, &[ipv4(17, 53, 60), ipv4(17, 53, 200)]);
    let args = ["run", &obj, "--pcap", &inp, "--section", "plain", "--json"];
    assert_eq!(verdicts(&args), ["XDP_DROP", "XDP_PASS"]);
    let o = nfkit(&["run", &obj, "--pcap", &inp, "--section", "fib"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        err.contains("bpf_get_current_pid_tgid") && err.contains("program fib"),
        "{err}"
    );
}

/// An XDP program calling a kfunc (an `extern ... __ksym` function).
const KFUNC: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#ifndef __ksym
#define __ksym __attribute__((section(".ksyms")))
#endif
struct bpf_dynptr;
extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags,
			       struct bpf_dynptr *ptr) __ksym;
SEC("xdp")
int kf(struct xdp_md *ctx)
{
	char buf[16];
	if (bpf_dynptr_from_xdp(ctx, 0, (struct bpf_dynptr *)buf))
		return XDP_DROP;
	return XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// A kfunc call is refused with a message naming the kernel function, the
/// program and the instruction, not as an undefined symbol.
#[test]
fn kfunc_call_is_named_as_a_kernel_function() {
    let d = Dir::new("run-kfunc");
    let obj = clang(&d, "kfunc", KFUNC);
    let inp = d.path("in.pcap");
    write_pcap(&inp, &[ipv4(17, 53, 60)]);
    let o = nfkit(&["run", &obj, "--pcap", &inp]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        err.contains("kernel function bpf_dynptr_from_xdp")
            && err.contains("kfunc")
            && err.contains("kf+")
            && !err.contains("undefined symbol"),
        "{err}"
    );
}

/// `run --json` and `prog test --json` list every map after the run, in
/// one form, so the VM's and the kernel's maps compare completely.
#[test]
fn run_and_prog_test_json_include_every_map_alike() {
    let d = Dir::new("run-maps-json");
    let inp = d.path("in.pcap");
    write_pcap(
        &inp,
        &[
            ipv4(17, 53, 60),
            ipv4(6, 80, 80),
            ipv4(1, 0, 60),
            ipv4(17, 53, 100),
        ],
    );
    for prog in ["tc_proto_stats", "xdp_port_filter", "xdp_lpm_route"] {
        let args = [corpus(prog), "--pcap", &inp, "--json"];
        let vm: serde_json::Value =
            serde_json::from_str(&ok(&nfkit(&[&["run"][..], &args].concat()))).expect("JSON");
        let maps = vm["maps"].as_array().expect("maps");
        assert!(!maps.is_empty(), "{prog}: {vm}");
        assert!(
            maps.iter()
                .all(|m| m["name"].is_string() && m["type"].is_string()),
            "{prog}: {vm}"
        );
        let counted = maps
            .iter()
            .filter_map(|m| m["entries"].as_array())
            .any(|e| {
                e.iter()
                    .any(|e| e["key"].is_string() && e["value"].is_string())
            });
        assert!(counted, "{prog}: no entries: {vm}");
        if common::is_root() {
            let k: serde_json::Value =
                serde_json::from_str(&ok(&nfkit(&[&["prog", "test"][..], &args].concat())))
                    .expect("JSON");
            assert_eq!(k["maps"], vm["maps"], "{prog}");
        }
    }
}

/// An XDP program forwarding by `bpf_fib_lookup` and reporting the result
/// with `bpf_perf_event_output` (14 packet bytes appended), and a TC
/// program bumping the received tunnel key's id.
const NET_HELPERS: &str = r#"
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, 4);
} events SEC(".maps");
SEC("xdp")
int fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup p = {};
	if (data + 34 > end)
		return XDP_DROP;
	p.family = 2;
	p.ifindex = ctx->ingress_ifindex;
	__builtin_memcpy(&p.ipv4_dst, data + 30, 4);
	long rc = bpf_fib_lookup(ctx, &p, sizeof(p), 0);
	__u32 ev[2] = { rc, p.ifindex };
	bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU | (14ULL << 32), ev, sizeof(ev));
	if (rc != 0)
		return XDP_PASS;
	__builtin_memcpy(data, p.dmac, 6);
	__builtin_memcpy(data + 6, p.smac, 6);
	return bpf_redirect(p.ifindex, 0);
}
SEC("tc")
int tun(struct __sk_buff *skb)
{
	struct bpf_tunnel_key k = {};
	if (bpf_skb_get_tunnel_key(skb, &k, sizeof(k), 0))
		return TC_ACT_SHOT;
	k.tunnel_id += 1;
	bpf_skb_set_tunnel_key(skb, &k, sizeof(k), 0);
	return TC_ACT_OK;
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// `--fib FILE` (as `ip` prints tables), perf records and tunnel keys in
/// `run` output and JSON.
#[test]
fn run_takes_routes_and_tunnel_keys_and_shows_perf_records() {
    let d = Dir::new("run-net-helpers");
    let obj = clang(&d, "net", NET_HELPERS);
    let inp = d.path("in.pcap");
    let out = d.path("out.pcap");
    let frame = ipv4(17, 53, 60);
    write_pcap(&inp, std::slice::from_ref(&frame));
    let fib = d.path("fib.txt");
    std::fs::write(
        &fib,
        "1: lo: <LOOPBACK,UP> mtu 65536 qdisc noqueue\\    link/loopback 00:00:00:00:00:00\n\
         link 3 eth0 mtu 1500 lladdr 02:00:00:00:00:03\n\
         198.18.0.0/24 dev eth0 proto kernel scope link src 198.18.0.1\n\
         198.18.0.2 dev eth0 lladdr 02:00:00:00:00:09 REACHABLE\n",
    )
    .expect("write fib");
    let json = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&ok(&nfkit(args))).expect("JSON")
    };
    let base = ["run", &obj, "--section", "fwd", "--pcap", &inp, "--json"];
    let with = json(&[&base[..], &["--fib", &fib, "--out", &out]].concat());
    let r = &with["results"][0];
    assert_eq!(r["verdict"], "XDP_REDIRECT", "{r}");
    assert_eq!(r["redirect"], "ifindex 3", "{r}");
    let ev = &r["perf_events"][0];
    assert_eq!(ev["map"], "events");
    assert_eq!(ev["data"], "0000000003000000", "SUCCESS, ifindex 3");
    assert_eq!(ev["packet"], hex_of(&frame[..14]));
    let sent = read_pcap(&out);
    assert_eq!(&sent[0].data[..12], &[2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 3]);
    // No table: not forwarded (4), the packet passes.
    let without = json(&base);
    let r = &without["results"][0];
    assert_eq!(r["verdict"], "XDP_PASS", "{r}");
    assert_eq!(r["perf_events"][0]["data"], "0400000001000000");
    // Text output names the record.
    let text = ok(&nfkit(&["run", &obj, "--section", "fwd", "--pcap", &inp]));
    assert!(
        text.contains("packet 1: perf event events cpu 0: 0400000001000000 + 14 packet bytes"),
        "{text}"
    );
    // A bad table names file and line.
    std::fs::write(&fib, "198.18.0.0/24 dev eth9\n").expect("write fib");
    let o = nfkit(&[&base[..], &["--fib", &fib]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("line 1") && err.contains("eth9"),
        "{err}"
    );

    // Tunnel keys: none given -> get fails -> shot; given -> id + 1 set.
    let tun = ["run", &obj, "--section", "tun", "--pcap", &inp, "--json"];
    assert_eq!(json(&tun)["results"][0]["verdict"], "TC_ACT_SHOT");
    let key = ["--tunnel-key", "id=5,remote=198.18.0.9,local=198.18.0.1"];
    let v = json(&[&tun[..], &key[..]].concat());
    let k = &v["results"][0]["tunnel_key"];
    assert_eq!(v["results"][0]["verdict"], "TC_ACT_OK", "{v}");
    assert_eq!(k["set_by_program"], true);
    assert_eq!(k["id"], 6);
    assert_eq!(k["remote"], "198.18.0.9");
}

/// `prog test` reads the kernel's perf records: the same data and packet
/// bytes as the VM's, padded as the perf ring stores them.
#[test]
fn prog_test_shows_the_kernels_perf_records() {
    if !common::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let d = Dir::new("run-perf-kernel");
    let obj = clang(&d, "net", NET_HELPERS);
    let inp = d.path("in.pcap");
    let frame = ipv4(17, 53, 60);
    write_pcap(&inp, std::slice::from_ref(&frame));
    let args = [
        "prog",
        "test",
        &obj,
        "--section",
        "fwd",
        "--pcap",
        &inp,
        "--json",
    ];
    let v: serde_json::Value = serde_json::from_str(&ok(&nfkit(&args))).expect("JSON");
    let ev = &v["packets"][0]["perf_events"][0];
    assert_eq!(ev["map"], "events", "{v}");
    let data = ev["data"].as_str().expect("data");
    // 8 bytes of data + 14 packet bytes, padded to 28 (32 with the size).
    assert_eq!(data.len(), 2 * 28, "{data}");
    assert_eq!(&data[16..44], hex_of(&frame[..14]));
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
