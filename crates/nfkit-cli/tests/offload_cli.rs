//! `nfkit offload` as a user runs it, without a kernel flower: the
//! `--dry-run` lines are parsed back into filters, matched on frames by
//! an implementation of flower's key semantics written here from the
//! tc-flower man page (not the crate's model), and "those filters, then
//! the program for what they pass on" must decide like the program
//! alone in the VM. Also `--max-rules` (fewer rules, the rest reported
//! as software, still equivalent), `--json`, the error for a device
//! without flower, and `status`/`remove` with nothing offloaded.

#[path = "../../nfkit-offload/tests/common/mod.rs"]
mod common;

use nfkit_offload::model::{run_xdp, Decision};
use nfkit_vm::{Vm, VmConfig};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Output};

fn nfkit(args: &[&str], state: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .arg("offload")
        .args(args)
        .env("NFKIT_STATE_DIR", state)
        .env("NFKIT_PIN_ROOT", state.join("pins"))
        .output()
        .expect("run nfkit")
}

fn tmpdir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "nfkit-offload-cli-{tag}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Builds `nfkit-offload/tests/progs/NAME.c` into DIR/NAME.o.
fn build_obj(name: &str, dir: &std::path::Path) -> PathBuf {
    let src = common::root().join(format!("crates/nfkit-offload/tests/progs/{name}.c"));
    let bytes = nfkit_corpus::BpfBuild::new(src)
        .arg("-mcpu=v3")
        .include(common::root().join("corpus"))
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join(format!("{name}.o"));
    std::fs::write(&out, bytes).unwrap();
    out
}

/// One `tc filter add ... flower` line, parsed, or a `u32` one: its
/// `match u8|u16|u32 V M at OFF` keys as (width in bytes, value, mask,
/// offset from the network header).
#[derive(Debug)]
struct Filter {
    prio: u32,
    protocol: Option<u16>,
    keys: Vec<(String, String)>,
    action: Act,
    u32_keys: Option<Vec<(usize, u32, u32, i64)>>,
}

fn parse_action(w: &[&str], l: &str) -> Act {
    match w {
        ["drop"] => Act::Drop,
        ["pass"] => Act::Pass,
        ["mirred", "egress", "redirect", "dev", d] => Act::Redirect(d.to_string()),
        other => panic!("action {other:?} in {l}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Act {
    Drop,
    Pass,
    Redirect(String),
}

fn parse_line(l: &str) -> Filter {
    let w: Vec<&str> = l.split_whitespace().collect();
    assert_eq!(&w[..4], &["tc", "filter", "add", "dev"], "{l}");
    assert_eq!(w[5], "ingress", "{l}");
    assert_eq!(w[6], "prio", "{l}");
    let prio: u32 = w[7].parse().unwrap();
    assert_eq!(w[8], "protocol", "{l}");
    let protocol = match w[9] {
        "all" => None,
        "ip" => Some(0x0800),
        "ipv6" => Some(0x86dd),
        x => Some(u16::from_str_radix(x.trim_start_matches("0x"), 16).unwrap()),
    };
    if w[10] == "u32" {
        let mut j = if w[11].starts_with("skip_") { 12 } else { 11 };
        let mut keys = Vec::new();
        while w[j] == "match" {
            let width = match w[j + 1] {
                "u8" => 1,
                "u16" => 2,
                "u32" => 4,
                x => panic!("match {x} in {l}"),
            };
            assert_eq!(w[j + 4], "at", "{l}");
            let off: i64 = w[j + 5].parse().unwrap();
            keys.push((width, num(w[j + 2]), num(w[j + 3]), off));
            j += 6;
        }
        assert_eq!(w[j], "action", "{l}");
        return Filter {
            prio,
            protocol,
            keys: Vec::new(),
            action: parse_action(&w[j + 1..], l),
            u32_keys: Some(keys),
        };
    }
    assert_eq!(w[10], "flower", "{l}");
    let mut i = 11;
    let mut keys = Vec::new();
    while w[i] != "action" {
        if w[i].starts_with("skip_") {
            i += 1;
            continue;
        }
        keys.push((w[i].to_string(), w[i + 1].to_string()));
        i += 2;
    }
    let action = parse_action(&w[i + 1..], l);
    Filter {
        prio,
        protocol,
        keys,
        action,
        u32_keys: None,
    }
}

fn num(s: &str) -> u32 {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

fn masked(s: &str, full: u32) -> (u32, u32) {
    match s.split_once('/') {
        Some((v, m)) => (num(v), num(m)),
        None => (num(s), full),
    }
}

/// flower's view of a frame: the fields its dissector extracts.
struct Fields<'a> {
    f: &'a [u8],
    eth: u16,
    l4: Option<usize>,
    proto: Option<u8>,
}

fn fields(f: &[u8]) -> Option<Fields<'_>> {
    if f.len() < 14 {
        return None;
    }
    let eth = u16::from_be_bytes([f[12], f[13]]);
    let mut x = Fields {
        f,
        eth,
        l4: None,
        proto: None,
    };
    if eth == 0x0800 && f.len() >= 34 {
        x.proto = Some(f[23]);
        let ihl = usize::from(f[14] & 0x0f) * 4;
        // flower dissects no L4 header of a fragment (not even the first).
        let frag = u16::from_be_bytes([f[20], f[21]]) & 0x3fff != 0;
        if !frag {
            x.l4 = Some(14 + ihl);
        }
    } else if eth == 0x86dd && f.len() >= 54 {
        x.proto = Some(f[20]);
        x.l4 = Some(54);
    }
    Some(x)
}

fn key_matches(x: &Fields, k: &str, v: &str) -> bool {
    let f = x.f;
    let v4 = x.eth == 0x0800;
    match k {
        "dst_mac" | "src_mac" => {
            let at = if k == "dst_mac" { 0 } else { 6 };
            let (val, m) = v.split_once('/').unwrap_or((v, "ff:ff:ff:ff:ff:ff"));
            let hex = |s: &str| -> Vec<u8> {
                s.split(':')
                    .map(|b| u8::from_str_radix(b, 16).unwrap())
                    .collect()
            };
            let (val, m) = (hex(val), hex(m));
            (0..6).all(|i| f[at + i] & m[i] == val[i] & m[i])
        }
        "ip_proto" => {
            let want = match v {
                "tcp" => 6,
                "udp" => 17,
                "icmp" => 1,
                "icmpv6" => 58,
                n => num(n) as u8,
            };
            x.proto == Some(want)
        }
        "ip_tos" | "ip_ttl" => {
            if x.proto.is_none() {
                return false;
            }
            let (val, m) = masked(v, 0xff);
            let got = match (k, v4) {
                ("ip_tos", true) => f[15],
                ("ip_tos", false) => (f[14] << 4) | (f[15] >> 4),
                ("ip_ttl", true) => f[22],
                _ => f[21],
            };
            u32::from(got) & m == val & m
        }
        "src_ip" | "dst_ip" => {
            if x.proto.is_none() {
                return false;
            }
            let (a, n) = v.split_once('/').unwrap();
            let a: IpAddr = a.parse().unwrap();
            let n: usize = n.parse().unwrap();
            let (bytes, at): (Vec<u8>, usize) = match a {
                IpAddr::V4(a) => (a.octets().to_vec(), if k == "src_ip" { 26 } else { 30 }),
                IpAddr::V6(a) => (a.octets().to_vec(), if k == "src_ip" { 22 } else { 38 }),
            };
            (0..n).all(|b| (f[at + b / 8] ^ bytes[b / 8]) >> (7 - b % 8) & 1 == 0)
        }
        "src_port" | "dst_port" => {
            let Some(l4) = x.l4 else { return false };
            let need = if x.proto == Some(6) { 20 } else { 8 };
            if f.len() < l4 + need {
                return false;
            }
            let at = l4 + if k == "src_port" { 0 } else { 2 };
            let p = u32::from(u16::from_be_bytes([f[at], f[at + 1]]));
            match v.split_once('-') {
                Some((lo, hi)) => (num(lo)..=num(hi)).contains(&p),
                None => p == num(v),
            }
        }
        "tcp_flags" => {
            let Some(l4) = x.l4 else { return false };
            if x.proto != Some(6) || f.len() < l4 + 20 {
                return false;
            }
            let (val, m) = masked(v, 0xfff);
            u32::from(f[l4 + 13]) & m == val & m
        }
        "ip_flags" => {
            if !v4 || x.proto.is_none() {
                return false;
            }
            let fo = u16::from_be_bytes([f[20], f[21]]);
            let is_frag = fo & 0x3fff != 0;
            let first = fo & 0x1fff == 0;
            match v {
                "nofrag" => !is_frag,
                "frag/firstfrag" => is_frag && first,
                other => panic!("ip_flags {other}"),
            }
        }
        other => panic!("key {other} not handled by the test"),
    }
}

fn filter_matches(fl: &Filter, frame: &[u8]) -> bool {
    if let Some(keys) = &fl.u32_keys {
        // u32 reads the whole aligned 32-bit word holding a key (tc packs
        // u8 and u16 matches into one), counted from the network header;
        // a word the frame does not hold is no match.
        let eth = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]));
        if fl.protocol.is_some_and(|p| Some(p) != eth) {
            return false;
        }
        return keys.iter().all(|&(width, v, m, off)| {
            let word = off.div_euclid(4) * 4;
            if (frame.len() as i64) < 14 + word + 4 {
                return false;
            }
            (0..width).all(|k| {
                let shift = 8 * (width - 1 - k);
                let (bv, bm) = ((v >> shift) as u8, (m >> shift) as u8);
                let at = 14 + off + k as i64;
                at >= 0 && frame[at as usize] & bm == bv & bm
            })
        });
    }
    let Some(x) = fields(frame) else { return false };
    if fl.protocol.is_some_and(|p| p != x.eth) {
        return false;
    }
    fl.keys.iter().all(|(k, v)| key_matches(&x, k, v))
}

/// The ifindex a redirect's device name stands for (`ifN` when the
/// index names no device here).
fn ifindex_of(dev: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .or_else(|| dev.strip_prefix("if")?.parse().ok())
        .unwrap_or(0)
}

/// Runs `nfkit offload OBJ --dev eth0 --dry-run EXTRA`, parses the lines
/// and checks them against the program in the VM on the example pcaps'
/// frames and random IPv4/IPv6 frames (IHL 5: see docs/offload.md on IP
/// options). Returns (rules, frames decided by a rule).
fn check_dry_run(name: &str, extra: &[&str]) -> (usize, usize) {
    let dir = tmpdir(name);
    let obj = build_obj(name, &dir);
    let mut args = vec![obj.to_str().unwrap(), "--dev", "eth0", "--dry-run"];
    args.extend_from_slice(extra);
    let o = nfkit(&args, &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let filters: Vec<Filter> = text.lines().map(parse_line).collect();
    for (i, f) in filters.iter().enumerate() {
        assert_eq!(f.prio, i as u32 + 1, "priorities in order");
    }
    let image = common::image_of(&std::fs::read(&obj).unwrap(), name);
    let entry = image.entries[0].name.clone();
    let vm = Vm::new(&image, VmConfig::kernel()).unwrap();
    let analysis =
        nfkit_offload::analyse(&image, &entry, &vm, &nfkit_offload::Limits::default()).unwrap();
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for p in [
        "ddos",
        "dscp_dispatch",
        "flow_limiter",
        "port_stats",
        "tcp_options",
    ] {
        let pcap = nfkit_pcap::read_file(common::root().join(format!("examples/{p}.pcap")))
            .unwrap_or_else(|e| panic!("{e}"));
        frames.extend(pcap.into_iter().map(|p| p.data));
    }
    let mut rng = common::Rng(0x5eed ^ name.len() as u64);
    while frames.len() < 20_000 {
        let f = common::random_frame(&mut rng, &analysis);
        if f.len() > 14 && f[12..14] == [8, 0] && f[14] & 0x0f != 5 {
            continue;
        }
        frames.push(f);
    }
    let (mut by_rules, mut bad) = (0, Vec::new());
    for f in &frames {
        let alone = run_xdp(&vm, &entry, f);
        let got = match filters.iter().find(|fl| filter_matches(fl, f)) {
            Some(fl) if fl.action == Act::Drop => Decision::Drop,
            Some(Filter {
                action: Act::Redirect(d),
                ..
            }) if d == "eth0" => Decision::Tx,
            Some(Filter {
                action: Act::Redirect(d),
                ..
            }) => Decision::Redirect(ifindex_of(d)),
            _ => run_xdp(&vm, &entry, f),
        };
        if filters
            .iter()
            .find(|fl| filter_matches(fl, f))
            .is_some_and(|fl| fl.action != Act::Pass)
        {
            by_rules += 1;
        }
        if got != alone {
            bad.push((f.clone(), got, alone));
        }
    }
    println!(
        "{name} {extra:?}: {} rules, {} frames, {} decided by rules, {} disagreements",
        filters.len(),
        frames.len(),
        by_rules,
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{name}: first disagreements {:?}",
        &bad[..bad.len().min(3)]
    );
    let _ = std::fs::remove_dir_all(&dir);
    (filters.len(), by_rules)
}

#[test]
fn dry_run_lines_decide_like_the_program() {
    let (n, by) = check_dry_run("acl", &[]);
    assert!(n >= 4 && by > 0, "acl offloads its drops and redirect");
    let (_, by) = check_dry_run("tcpflags", &[]);
    assert!(by > 0);
    let (_, by) = check_dry_run("v6frag", &[]);
    assert!(by > 0);
    let (_, by) = check_dry_run("ethertype", &[]);
    assert!(by > 0);
}

#[test]
fn max_rules_falls_back_and_stays_equivalent() {
    let (n_all, by_all) = check_dry_run("acl", &[]);
    let (n, by) = check_dry_run("acl", &["--max-rules", "2"]);
    // The budget counts flower rules; the guards come on top: 8 u32 ones
    // and the flower one for TCP headers cut short.
    assert!(n <= 2 + 9, "{n} rules with --max-rules 2");
    assert!(n < n_all && by < by_all, "fewer rules decide fewer frames");
    let dir = tmpdir("acl-json");
    let obj = build_obj("acl", &dir);
    let o = nfkit(
        &[
            obj.to_str().unwrap(),
            "--dev",
            "eth0",
            "--dry-run",
            "--json",
            "--max-rules",
            "2",
        ],
        &dir,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["over_budget"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["rules"].as_u64().unwrap() as usize, n);
    let reasons: Vec<String> = v["fallbacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["why"].as_str().unwrap().to_string())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("--max-rules 2")),
        "{reasons:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_and_empty_status() {
    let dir = tmpdir("errors");
    // No such interface: a clear error, exit 1 (nothing is installed).
    let obj = build_obj("acl", &dir);
    let o = nfkit(&[obj.to_str().unwrap(), "--dev", "ofl-none0"], &dir);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ofl-none0"), "{err}");
    // A file that is no program.
    let bad = dir.join("bad.o");
    std::fs::write(&bad, b"\x7fELF garbage").unwrap();
    let o = nfkit(&[bad.to_str().unwrap(), "--dev", "eth0", "--dry-run"], &dir);
    assert_eq!(o.status.code(), Some(1));
    // The watch's bounds: an interval of 0 ms or over a minute, and
    // data-path maps without the watch that keeps such rules true.
    for args in [
        &["--watch", "--interval", "0"][..],
        &["--watch", "--interval", "60001"][..],
        &["--data-path-maps"][..],
    ] {
        let mut all = vec![obj.to_str().unwrap(), "--dev", "eth0", "--dry-run"];
        all.extend_from_slice(args);
        let o = nfkit(&all, &dir);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--interval") || err.contains("--watch"),
            "{args:?}: {err}"
        );
    }
    let o = nfkit(&["status"], &dir);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing offloaded"));
    let o = nfkit(&["remove", "--dev", "eth0"], &dir);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing offloaded on eth0"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A namespace with a veth pair (`ofl…a`/`ofl…b`), deleted on drop.
struct Bed {
    ns: String,
    dev: String,
}

impl Bed {
    fn new(tag: &str) -> Bed {
        let id = std::process::id() % 100_000;
        let bed = Bed {
            ns: format!("ofl-{tag}-{id}"),
            dev: format!("ofl{id}a"),
        };
        let ip = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().expect("run ip");
            assert!(
                o.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        ip(&["netns", "add", &bed.ns]);
        let peer = format!("ofl{id}b");
        ip(&[
            "-n", &bed.ns, "link", "add", &bed.dev, "type", "veth", "peer", "name", &peer,
        ]);
        ip(&["-n", &bed.ns, "link", "set", &bed.dev, "up"]);
        ip(&["-n", &bed.ns, "link", "set", &peer, "up"]);
        bed
    }

    fn qdiscs(&self) -> String {
        let o = Command::new("tc")
            .args(["-n", &self.ns, "qdisc", "show", "dev", &self.dev])
            .output()
            .expect("run tc");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

/// Real rules through netlink on a veth: where the kernel has flower,
/// they are installed, listed by `status` with their counters and taken
/// away by `remove`; where it has not (this project's machines), the
/// error says so and nothing is left behind (no qdisc, no state).
#[test]
fn host_kernel_installs_or_says_flower_is_missing() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tmpdir("host");
    let obj = build_obj("acl", &dir);
    let bed = Bed::new("host");
    let before = bed.qdiscs();
    let o = nfkit(
        &[
            obj.to_str().unwrap(),
            "--dev",
            &bed.dev,
            "--netns",
            &bed.ns,
            "--skip-hw",
        ],
        &dir,
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if o.status.success() {
        let s = nfkit(&["status", "--json"], &dir);
        assert!(s.status.success());
        let v: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
        let inst = &v[0];
        assert_eq!(inst["dev"], bed.dev.as_str());
        let rules = inst["rules"].as_array().unwrap();
        assert_eq!(
            rules.len() as u64,
            inst["expected_rules"].as_u64().unwrap(),
            "{v}"
        );
        assert!(
            rules
                .iter()
                .all(|r| r["kind"] == "flower" || r["kind"] == "u32"),
            "{v}"
        );
        let r = nfkit(&["remove", "--dev", &bed.dev, "--netns", &bed.ns], &dir);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(
            !bed.qdiscs().contains("clsact"),
            "remove takes the qdisc it made"
        );
        println!(
            "flower present: {} rules installed and removed",
            rules.len()
        );
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        // cls_flower, or (first, for the u32 guards) the gact action.
        assert!(err.contains("kernel lacks"), "{err}");
        assert_eq!(
            bed.qdiscs(),
            before,
            "the qdisc made for the rules is gone again"
        );
        let s = nfkit(&["status"], &dir);
        assert!(String::from_utf8_lossy(&s.stdout).contains("nothing offloaded"));
        println!("no flower here: {}", err.trim());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--watch` keeps the rules in step with the deployed program's maps:
/// the blacklist test program deployed on a veth, `nfkit map set` and
/// `delete` on its LPM and hash maps, and each change shows up as a rule
/// change (`--dry-run`: this kernel has no flower), with its latency.
#[test]
fn watch_follows_map_changes() {
    use std::io::BufRead;
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tmpdir("watch");
    let obj = build_obj("blacklist", &dir);
    let bed = Bed::new("watch");
    let pins = PathBuf::from(format!("/sys/fs/bpf/ofl-watch-{}", std::process::id()));
    /// Removes the pins (and so the deployment's link) even on failure.
    struct Pins(PathBuf);
    impl Drop for Pins {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _pins = Pins(pins.clone());
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_nfkit"))
            .args(args)
            .env("NFKIT_STATE_DIR", &dir)
            .env("NFKIT_PIN_ROOT", &pins)
            .output()
            .expect("run nfkit")
    };
    let o = run(&[
        "deploy",
        obj.to_str().unwrap(),
        "--dev",
        &bed.dev,
        "--netns",
        &bed.ns,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args([
            "offload",
            obj.to_str().unwrap(),
            "--dev",
            &bed.dev,
            "--netns",
            &bed.ns,
            "--dry-run",
            "--watch",
            "--interval",
            "10",
            "--watch-for",
            "60",
            "--json",
        ])
        .env("NFKIT_STATE_DIR", &dir)
        .env("NFKIT_PIN_ROOT", &pins)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run nfkit offload --watch");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let next = || -> serde_json::Value {
        let l = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a line from the watcher");
        serde_json::from_str(&l).unwrap()
    };
    let first = next();
    assert_eq!(first["maps_from"], "pinned maps", "{first}");
    assert_eq!(first["offloading_rules"], 0, "empty maps: nothing to drop");
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let mut latencies = Vec::new();
    // The rules' priorities as installed: each change switches to a
    // fresh band, adding the new rules in order before deleting the old
    // ones last to first.
    let mut prios: Vec<u64> = (1..=first["rules"].as_u64().unwrap()).collect();
    let mut change = |args: &[&str], want: &str| -> serde_json::Value {
        let t0 = now_ns();
        let o = run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let ev = next();
        assert_eq!(ev["event"], "rules changed", "{ev}");
        let lines: Vec<String> = ev["changed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        assert!(
            want.is_empty() || lines.iter().any(|l| l.contains(want)),
            "{want} in {lines:?}"
        );
        latencies.push((ev["applied_unix_ns"].as_u64().unwrap() - t0) / 1000);
        let now: Vec<u64> = ev["prios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        assert!(now.windows(2).all(|w| w[0] < w[1]), "{ev}");
        assert!(now.iter().all(|p| !prios.contains(p)), "{ev}: {prios:?}");
        let steps: Vec<&str> = ev["switch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        let adds: Vec<u64> = steps
            .iter()
            .take_while(|l| l.starts_with("tc filter add"))
            .map(|l| num(l.split(" prio ").nth(1).unwrap().split(' ').next().unwrap()) as u64)
            .collect();
        let dels: Vec<u64> = steps[adds.len()..]
            .iter()
            .map(|l| {
                assert!(l.starts_with("tc filter del"), "{l}");
                num(l.rsplit(' ').next().unwrap()) as u64
            })
            .collect();
        assert_eq!(adds, now, "{ev}");
        let mut old_desc = prios.clone();
        old_desc.reverse();
        assert_eq!(dels, old_desc, "{ev}");
        prios = now;
        ev
    };
    let dev = bed.dev.clone();
    change(
        &[
            "map",
            "set",
            "src_prefixes",
            "18000000c0a80100",
            "1",
            "--dev",
            &dev,
        ],
        "src_ip 192.168.1.0/24 action drop",
    );
    let ev = change(
        // The key is a `__u32` holding the address in network order:
        // its bytes, in hex.
        &["map", "set", "dst_block", "cb007109", "1", "--dev", &dev],
        "dst_ip 203.0.113.9/32 action drop",
    );
    // Plus the 8 u32 guards of rule sets that decide IPv4 frames.
    assert_eq!(ev["rules"], 2 + 8, "{ev}");
    let ev = change(
        &[
            "map",
            "delete",
            "src_prefixes",
            "18000000c0a80100",
            "--dev",
            &dev,
        ],
        "",
    );
    assert_eq!(ev["rules"], 1 + 8, "{ev}");
    assert!(ev["removed"].as_u64().unwrap() >= 1, "{ev}");
    println!("map change to rule (dry run, 10 ms polling), µs: {latencies:?}");
    let _ = child.kill();
    let _ = child.wait();
    let o = run(&["undeploy", "--dev", &dev]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&pins);
    let _ = std::fs::remove_dir_all(&dir);
}
