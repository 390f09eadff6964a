//! Issue 6's end-to-end acceptance, for EVERY example script in
//! `examples/*.py`: deployed with `nfkit deploy` on a veth in a
//! namespace testbed, its pcap replayed through nfkit's sender
//! (nfkit-traffic), the verdicts observed on real traffic equal what
//! `nfkit run SCRIPT --pcap PCAP --json` gives in the VM.
//!
//! Testbed: a sender namespace and a system-under-test namespace joined
//! by a veth pair whose ends carry the pcaps' MAC addresses
//! (02:00:00:00:00:02 -> 02:00:00:00:00:01, so no frame is rewritten),
//! no IP addresses and IPv6 off (nothing but the replay crosses the
//! pair), and, for every REDIRECT target the VM reports, a veth in the
//! SUT namespace made with exactly that ifindex (`ip link add ... index
//! N`), whose peer is the collector. Each example is deployed four
//! ways, one test each: `--hook xdp-generic`; `--hook xdp` (native: the
//! collectors' peers and the sender's end then run the catalogue's
//! `xdp_allow`, since a veth only takes redirected or TX'd frames when
//! its receiving end has an XDP program); `--hook tc-ingress` through a
//! tcx link and through the clsact fallback (forced). At TC ingress the
//! packet taps see each frame before the program, so PASS is checked
//! through the counters there.
//! Frames go out one at a time through nfkit-traffic's `FrameSender`.
//!
//! The clock is pinned as `nfkit run` pins it (docs/abi.md 7): before
//! each packet the test writes `clock_pinned = 1, now_ns = the packet's
//! capture time` into the deployment's pinned `nfkit_config`, sends the
//! one packet, and waits until the per-verdict counters (`nfkit_stats`)
//! have counted it. So the comparison is exact, packet by packet:
//!
//! * per packet, the (chain, verdict) counter the kernel program moved
//!   equals the VM's (chain, verdict) for that packet;
//! * the frames counted by receivers (nfkit-traffic, AF_PACKET) equal the
//!   VM's: on the SUT device the PASSed ones (XDP hands them to the
//!   stack; dropped frames never reach the packet taps), on each
//!   collector the frames the VM redirected to its ifindex, on the
//!   sender's device the TX ones;
//! * `nfkit status --json` shows the VM's per-chain, per-verdict counts;
//! * every map of the script, read with `nfkit map dump --json`, has the
//!   entries the VM's run ends with (array entries that are 0 left out,
//!   per-CPU values summed, as `nfkit run` prints them).
//!
//! Needs root (skipped otherwise). Namespaces, veths and the private
//! bpffs mount are removed by RAII guards even when an assertion fails.

mod common;
use common::{examples, is_root, json, le, nfkit_cmd, output_ok, Scratch, NFKIT};
use nfkit_kernel::deploy::open_pinned_map;
use nfkit_kernel::testbed::{Netns, Veth, XdpLink};
use nfkit_kernel::KMap;
use nfkit_traffic::recv::{Receiver, RecvOptions};
use nfkit_traffic::send::FrameSender;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const SUT_MAC: &str = "02:00:00:00:00:01";
const SND_MAC: &str = "02:00:00:00:00:02";

/// Runs nfkit with the scratch paths and `NFKIT_TC_ATTACH=tc_attach`;
/// its stdout (panics on failure).
fn nfkit(s: &Scratch, tc_attach: &str, args: &[&str]) -> String {
    let mut c = nfkit_cmd(None, s);
    c.env("NFKIT_TC_ATTACH", tc_attach);
    output_ok(c, args)
}

/// The testbed; fields drop in order: the pair, then the namespaces
/// (the collectors live in `sut` and go with it).
struct Bed {
    veth: Veth,
    sut: Netns,
    snd: Netns,
    /// (ifindex, collector device in `sut`) per redirect target.
    collectors: Vec<(u32, String)>,
}

impl Bed {
    fn new(redirect_targets: &[u32]) -> Bed {
        let sut = Netns::new("sut").expect("netns");
        let snd = Netns::new("snd").expect("netns");
        for ns in [&sut, &snd] {
            ns.exec(&[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .expect("IPv6 off");
        }
        // Collectors first, so their ifindexes are free in the new namespace.
        let mut collectors = Vec::new();
        for &t in redirect_targets {
            let (dev, peer) = (format!("col{t}"), format!("col{t}p"));
            let idx = t.to_string();
            let pidx = (10_000 + t).to_string();
            sut.ip(&[
                "link", "add", &dev, "index", &idx, "type", "veth", "peer", "name", &peer, "index",
                &pidx,
            ])
            .expect("collector veth");
            for d in [&dev, &peer] {
                sut.ip(&["link", "set", d, "up"]).expect("collector up");
            }
            assert_eq!(sut.ifindex(&dev).expect("ifindex"), t);
            collectors.push((t, peer));
        }
        let veth = Veth::new(Some(&snd), None, Some(&sut), None).expect("veth");
        for (end, ns, mac) in [(&veth.a, &snd, SND_MAC), (&veth.b, &sut, SUT_MAC)] {
            ns.ip(&["link", "set", &end.dev, "address", mac])
                .expect("set MAC");
        }
        Bed {
            veth,
            sut,
            snd,
            collectors,
        }
    }
}

fn receiver(dev: &str, ns: &Netns) -> Receiver {
    Receiver::start(&RecvOptions {
        dev: dev.to_string(),
        netns: Some(ns.name().to_string()),
        ..RecvOptions::default()
    })
    .expect("receiver")
}

/// `nfkit_stats` summed over CPUs, rows 0..rows.
fn stats(m: &KMap, rows: u32) -> Vec<u64> {
    (0..rows)
        .map(|i| {
            m.lookup_percpu(&i.to_le_bytes())
                .ok()
                .flatten()
                .map_or(0, |v| v.iter().map(|c| le(c)).sum())
        })
        .collect()
}

/// Pins the deployment's clock (`nf_config.clock_pinned`, `now_ns`).
fn pin_clock(cfg: &KMap, now_ns: u64) {
    let key = 0u32.to_le_bytes();
    let old = cfg.lookup(&key).expect("config");
    let v = old
        .as_deref()
        .and_then(nfkit_abi::NfConfig::from_bytes)
        .unwrap_or_default()
        .pinned_at(now_ns)
        .to_bytes();
    cfg.update(&key, &v, 0).expect("pin clock");
}

/// A map dump (`nfkit map dump --json`) as sorted (key, value) pairs,
/// array entries of 0 left out; keys as JSON text (an integer, or a
/// tuple key's array).
fn dumped(dump: &Value, is_array: bool) -> Result<Vec<(String, u64)>, String> {
    let mut rows = Vec::new();
    for e in dump.as_array().ok_or("not an array")? {
        let key = match &e["key"] {
            Value::Null => return Err(format!("key {e}")),
            k => k.to_string(),
        };
        let value = match &e["value"] {
            Value::Object(o) => o.get("total").and_then(Value::as_u64),
            v => v.as_u64(),
        }
        .ok_or_else(|| format!("value {e}"))?;
        if !(is_array && value == 0) {
            rows.push((key, value));
        }
    }
    rows.sort();
    Ok(rows)
}

/// What one example gave: packets, and (verdict, count) seen.
struct Outcome {
    packets: usize,
    received: BTreeMap<String, u64>,
}

/// One run of an example: its name, the hook it is deployed at, and how
/// TC attaches (`NFKIT_TC_ATTACH`).
#[derive(Clone, Copy)]
struct Run<'a> {
    name: &'a str,
    hook: &'a str,
    tc_attach: &'static str,
}

impl Run<'_> {
    /// nfkit with the scratch paths and this run's TC attach mode.
    fn nfkit(&self, s: &Scratch, args: &[&str]) -> String {
        nfkit(s, self.tc_attach, args)
    }
}

/// What the VM says about an example, and what the compiler knows of it.
struct Expected {
    script: PathBuf,
    /// `nfkit run --json --trace` of the script on its pcap.
    vm: Value,
    /// Per packet (chain, verdict, code, redirect), from `vm`.
    per_packet: Vec<Value>,
    /// Chain names by statistics slot.
    slots: Vec<String>,
    compiled: nfkit_lang::Compiled,
    packets: Vec<nfkit_pcap::Packet>,
    /// The ifindexes the VM redirects to, sorted, once each.
    targets: Vec<u32>,
}

impl Expected {
    /// The script as a `&str` argument.
    fn script_s(&self) -> &str {
        self.script.to_str().expect("utf-8")
    }

    /// How many of the VM's packets `f` picks.
    fn count(&self, f: &dyn Fn(&Value) -> bool) -> u64 {
        self.per_packet.iter().filter(|p| f(p)).count() as u64
    }
}

/// The XDP code the VM gave packet `p`.
fn code(p: &Value) -> u64 {
    p["code"].as_u64().expect("code")
}

/// Runs example `name` in the VM (`nfkit run`) and compiles it: the
/// account the kernel must match.
fn vm_account(name: &str) -> Expected {
    let script = examples().join(format!("{name}.py"));
    let pcap = examples().join(format!("{name}.pcap"));
    let (script_s, pcap_s) = (
        script.to_str().expect("utf-8"),
        pcap.to_str().expect("utf-8"),
    );

    // The VM's account: per packet (chain, verdict, code, redirect).
    let out = Command::new(NFKIT)
        .args(["run", script_s, "--pcap", pcap_s, "--json", "--trace"])
        .output()
        .expect("nfkit run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vm = json(&String::from_utf8_lossy(&out.stdout));
    let per_packet = vm["per_packet"].as_array().expect("per_packet").clone();

    // Chain names by statistics slot, and the hook, from the compiler.
    let source = std::fs::read_to_string(&script).expect("script");
    let opts = nfkit_lang::Options {
        search: nfkit_nf::SearchPath::from_env(&[]),
        hook: None,
    };
    let compiled = nfkit_lang::compile(script_s, &source, &opts).expect("compile");
    let mut slots = vec!["(unclaimed)".to_string()];
    slots.extend(compiled.program.chain_names());
    assert_eq!(
        compiled.hook,
        nfkit_nf::Hook::Xdp,
        "{name}: only XDP examples so far"
    );

    let packets = nfkit_pcap::read_file(&pcap).expect("pcap");
    assert_eq!(packets.len(), per_packet.len());
    let mut targets: Vec<u32> = per_packet
        .iter()
        .filter(|p| code(p) == 4)
        .filter_map(|p| p["redirect"].as_u64().map(|r| r as u32))
        .collect();
    targets.sort();
    targets.dedup();
    Expected {
        script,
        vm,
        per_packet,
        slots,
        compiled,
        packets,
        targets,
    }
}

/// The deployment's pinned `nfkit_config` and `nfkit_stats`.
struct Deployed {
    cfg: KMap,
    stats: KMap,
    /// Rows of `nfkit_stats`: 16 per slot.
    rows: u32,
}

/// `nfkit deploy`s the script on the SUT end of the bed at the run's hook
/// and opens its pinned config and statistics maps.
fn deploy(run: Run, s: &Scratch, bed: &Bed, exp: &Expected) -> Deployed {
    let d = json(&run.nfkit(
        s,
        &[
            "deploy",
            exp.script_s(),
            "--dev",
            &bed.veth.b.dev,
            "--netns",
            bed.sut.name(),
            "--hook",
            run.hook,
            "--json",
        ],
    ));
    let pins: BTreeMap<String, PathBuf> = d["deployment"]["maps"]
        .as_array()
        .expect("maps")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_string(),
                PathBuf::from(m["pin"].as_str().unwrap_or_default()),
            )
        })
        .collect();
    let open = |n: &str| open_pinned_map(n, &pins[n]).expect("pinned map");
    Deployed {
        cfg: open("nfkit_config"),
        stats: open("nfkit_stats"),
        rows: exp.slots.len() as u32 * 16,
    }
}

/// The catalogue's `xdp_allow` (PASS) and, in native XDP, its links on
/// the collectors' peers and the sender's end: a redirect into a veth (or
/// XDP_TX back to the sender) arrives only where the receiving end runs
/// an XDP program of its own.
fn peer_xdp(hook: &str, bed: &Bed) -> (nfkit_kernel::Loaded, Vec<XdpLink>) {
    let pass = nfkit_kernel::load_image(
        &nfkit_object::Image::from_elf(
            nfkit_nf::catalogue::object("base", nfkit_nf::Hook::Xdp).expect("nf.base"),
            "base.xdp.o",
        )
        .expect("image"),
        &nfkit_kernel::LoadOptions {
            entries: Some(vec!["xdp_allow".into()]),
            ..nfkit_kernel::LoadOptions::default()
        },
    )
    .expect("load xdp_allow");
    let mut peers = Vec::new();
    if hook == "xdp" {
        let prog = pass.prog("xdp_allow").expect("xdp_allow");
        let ends = bed
            .collectors
            .iter()
            .map(|(_, d)| (d.as_str(), &bed.sut))
            .chain([(bed.veth.a.dev.as_str(), &bed.snd)]);
        for (dev, ns) in ends {
            peers.push(XdpLink::attach(prog, Some(ns), dev, false).expect("peer XDP"));
        }
    }
    (pass, peers)
}

/// The frame counters: the SUT device, the sender's device, each
/// collector.
struct Receivers {
    at_sut: Receiver,
    at_snd: Receiver,
    at_col: Vec<(u32, Receiver)>,
}

impl Receivers {
    /// Starts them all.
    fn start(bed: &Bed) -> Receivers {
        Receivers {
            at_sut: receiver(&bed.veth.b.dev, &bed.sut),
            at_snd: receiver(&bed.veth.a.dev, &bed.snd),
            at_col: bed
                .collectors
                .iter()
                .map(|(t, dev)| (*t, receiver(dev, &bed.sut)))
                .collect(),
        }
    }

    /// Stops all receivers at once (each takes up to 100 ms to notice).
    fn stop(self) {
        for r in std::iter::once(&self.at_sut)
            .chain([&self.at_snd])
            .chain(self.at_col.iter().map(|(_, r)| r))
        {
            r.stop();
        }
    }
}

/// The `nfkit_stats` counters that moved from `before` to `now`, as
/// "chain verdict +n".
fn moved_counters(now: &[u64], before: &[u64], slots: &[String]) -> Vec<String> {
    now.iter()
        .zip(before)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(j, (a, b))| {
            let slot = slots.get(j / 16).cloned().unwrap_or_else(|| "?".into());
            let k = nfkit_control::runner::STAT_NAMES
                .get(j % 16)
                .copied()
                .unwrap_or("?");
            format!("{slot} {k} +{}", a - b)
        })
        .collect()
}

/// Replays the pcap one packet at a time with the clock pinned to its
/// time, and checks that each moves exactly the VM's (chain, verdict)
/// counter.
fn replay_and_check_verdicts(name: &str, bed: &Bed, dep: &Deployed, exp: &Expected) {
    let sender = FrameSender::open(&bed.veth.a.dev, Some(bed.snd.name())).expect("sender");
    let mut before = stats(&dep.stats, dep.rows);
    let mut mismatches = Vec::new();
    for (i, (p, want)) in exp.packets.iter().zip(&exp.per_packet).enumerate() {
        pin_clock(&dep.cfg, p.ts_ns);
        sender.send(&p.data).expect("send");
        let t0 = Instant::now();
        let now = loop {
            let now = stats(&dep.stats, dep.rows);
            if now.iter().sum::<u64>() > before.iter().sum::<u64>() {
                break now;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "{name}: packet {} was never counted by the deployed program",
                i + 1
            );
            std::thread::sleep(Duration::from_micros(200));
        };
        let moved = moved_counters(&now, &before, &exp.slots);
        let expect = format!(
            "{} {} +1",
            want["chain"].as_str().unwrap_or("?"),
            want["verdict"].as_str().unwrap_or("?")
        );
        if moved != [expect.clone()] {
            mismatches.push(format!("packet {}: kernel {moved:?}, VM {expect}", i + 1));
        }
        before = now;
    }
    assert!(
        mismatches.is_empty(),
        "{name}: per-packet verdicts differ:\n{}",
        mismatches.join("\n")
    );
}

/// Checks the frames at each receiver against the VM's count; gives
/// (what, frames) per receiver.
fn check_frames(run: Run, rx: &Receivers, exp: &Expected) -> BTreeMap<String, u64> {
    let name = run.name;
    // At TC ingress the packet taps see every frame before the program
    // does: PASS is then counted through `nfkit_stats` only.
    let (what, passed) = if run.hook.starts_with("tc") {
        ("all, before TC (SUT device)", exp.packets.len() as u64)
    } else {
        ("passed (SUT device)", exp.count(&|p| code(p) == 2))
    };
    let mut expected: Vec<(String, &Receiver, u64)> = vec![
        (what.into(), &rx.at_sut, passed),
        (
            "TX (sender device)".into(),
            &rx.at_snd,
            exp.count(&|p| code(p) == 3),
        ),
    ];
    for (t, r) in &rx.at_col {
        let n = exp.count(&|p| code(p) == 4 && p["redirect"].as_u64() == Some(u64::from(*t)));
        expected.push((format!("redirected to ifindex {t}"), r, n));
    }
    let t0 = Instant::now();
    while expected.iter().any(|(_, r, n)| r.snapshot().frames < *n)
        && t0.elapsed() < Duration::from_secs(3)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Late extras would show up now.
    std::thread::sleep(Duration::from_millis(50));
    let mut received = BTreeMap::new();
    for (what, r, n) in &expected {
        let got = r.snapshot().frames;
        assert_eq!(got, *n, "{name}: frames {what}: kernel {got}, VM {n}");
        received.insert(what.clone(), got);
    }
    received
}

/// Maps: the kernel's pinned maps (`nfkit map dump`) against the VM's
/// final maps.
fn check_maps(run: Run, s: &Scratch, exp: &Expected) {
    let name = run.name;
    let vm_maps = exp.vm["maps"].as_object().expect("maps");
    for (map, rows) in vm_maps {
        let mut want: Vec<(String, u64)> = rows
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| (r["key"].to_string(), r["value"].as_u64().unwrap_or(0)))
            .collect();
        want.sort();
        let spec = exp.compiled.program.maps.iter().find(|m| &m.name == map);
        let is_array = spec.is_some_and(|m| {
            matches!(
                m.map_type,
                nfkit_object::MapType::Array | nfkit_object::MapType::PercpuArray
            )
        });
        let dump = json(&run.nfkit(s, &["map", "dump", map, "--json"]));
        let got = dumped(&dump, is_array).unwrap_or_else(|e| panic!("{name}: {map}: {e}"));
        assert_eq!(got, want, "{name}: map {map}: kernel / VM");
    }
}

/// `nfkit status --json`: the per-chain, per-verdict counters read from
/// the pinned nfkit_stats are the VM's `chains`.
fn check_status(run: Run, s: &Scratch, exp: &Expected) {
    let st = json(&run.nfkit(s, &["status", "--json"]));
    assert_eq!(
        st["deployments"][0]["verdicts"], exp.vm["chains"],
        "{}: status verdicts / nfkit run chains",
        run.name
    );
}

/// Runs example `name` deployed at `hook` (`xdp-generic`, or
/// `tc-ingress` attached as `tc_attach` says).
fn run_example(name: &str, hook: &str, tc_attach: &'static str) -> Outcome {
    let run = Run {
        name,
        hook,
        tc_attach,
    };
    let exp = vm_account(name);
    let bed = Bed::new(&exp.targets);
    let s = Scratch::new(&format!("e2e-{name}-{hook}-{tc_attach}"));
    let dep = deploy(run, &s, &bed, &exp);
    let (_pass, _peers) = peer_xdp(hook, &bed);
    let rx = Receivers::start(&bed);

    replay_and_check_verdicts(name, &bed, &dep, &exp);
    let received = check_frames(run, &rx, &exp);
    check_maps(run, &s, &exp);
    check_status(run, &s, &exp);

    rx.stop();
    run.nfkit(&s, &["undeploy"]);
    let stj = json(&run.nfkit(&s, &["status", "--json"]));
    assert_eq!(stj["deployments"].as_array().map(Vec::len), Some(0));
    Outcome {
        packets: exp.packets.len(),
        received,
    }
}

#[test]
fn every_example_gives_the_vm_verdicts_on_real_traffic() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let names = example_names();
    assert!(names.len() >= 5, "examples: {names:?}");
    for name in &names {
        let t0 = Instant::now();
        let o = run_example(name, "xdp-generic", "auto");
        println!(
            "{name}: {} packets, received {:?}, {:.1} s",
            o.packets,
            o.received,
            t0.elapsed().as_secs_f64()
        );
    }
}

/// Every `examples/NAME.py` that has its `NAME.pcap`.
fn example_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(examples())
        .expect("examples")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".py").map(str::to_string)
        })
        .filter(|n| examples().join(format!("{n}.pcap")).exists())
        .collect();
    names.sort();
    names
}

/// The same with native XDP (`--hook xdp`).
#[test]
fn every_example_gives_the_vm_verdicts_in_native_xdp() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for name in example_names() {
        let o = run_example(&name, "xdp", "auto");
        println!(
            "{name} (native): {} packets, received {:?}",
            o.packets, o.received
        );
    }
}

/// The same at TC ingress through a tcx link (this kernel's default).
#[test]
fn every_example_gives_the_vm_verdicts_at_tc_ingress_through_tcx() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for name in example_names() {
        let o = run_example(&name, "tc-ingress", "tcx");
        println!(
            "{name} (tcx): {} packets, received {:?}",
            o.packets, o.received
        );
    }
}

/// The same at TC ingress through the clsact fallback (forced: this
/// kernel has tcx): verdicts per packet, TX and redirected frames at
/// their receivers, maps. The VM side is `nfkit run` of the script as
/// written (for XDP): the examples read the packet from the L2 header,
/// which is offset 0 at both hooks, so the verdicts must not differ.
#[test]
fn every_example_gives_the_vm_verdicts_at_tc_ingress_through_clsact() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for name in example_names() {
        let t0 = Instant::now();
        let o = run_example(&name, "tc-ingress", "clsact");
        println!(
            "{name} (tc): {} packets, received {:?}, {:.1} s",
            o.packets,
            o.received,
            t0.elapsed().as_secs_f64()
        );
    }
}
