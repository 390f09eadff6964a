//! The kernel backend's live-swap acceptance test: while numbered UDP
//! traffic flows at a fixed rate, at least 100 swaps between two chain
//! versions lose no packet that both versions pass.
//!
//! Testbed: three network namespaces, sender -> SUT -> receiver, joined
//! by two veth pairs (198.18.20.0/30, 198.18.21.0/30). The SUT forwards
//! with the kernel (IP forwarding, a static neighbour entry for the
//! receiver); the chain runs at the SUT's ingress and passes every
//! packet. Two versions (`tests/scripts/live_swap_v{1,2}.py`) count the
//! flow in the same map, `seen`, at index 0 and 1; a redeploy keeps that
//! map. The receiver is an XDP program of its own
//! (`tests/progs/seq_counter.c`, compiled here by clang) that sets one
//! bit per sequence number and counts first arrivals and duplicates.
//!
//! For each hook (native and generic XDP) and deploy mode: a baseline
//! run without swaps, then a run with at least 100 redeploys of v2, v1,
//! v2, ... through `nfkit_kernel::deploy`. Both must deliver every
//! sequence number exactly once, and the versions' counters must add up
//! to the frames sent.
//!
//! Needs root (skipped otherwise). Namespaces, veths, the private bpffs
//! mount and state directory, and the receiver's link are removed by
//! RAII guards even when an assertion fails.

mod common;
use common::{is_root, Scratch};
use nfkit_abi::AttachPoint as Hook;
use nfkit_control::deploy::{deploy_script, DeploySpec, Mode};
use nfkit_kernel::deploy::{self, DeployOutcome, Paths};
use nfkit_kernel::testbed::{Netns, Veth, XdpLink};
use nfkit_kernel::{load_object_file, KMap, Loaded};
use nfkit_traffic::flows::Flow;
use nfkit_traffic::{FrameSpec, Mac, Proto, SendOptions, SendReport, Source};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Destination port of the numbered flow (the scripts' FLOW_PORT).
const FLOW_PORT: u16 = 7709;
/// Frames per second.
const RATE: f64 = 10_000.0;
/// Frames of the baseline run.
const BASELINE_FRAMES: u64 = 20_000;
/// The swap run lasts until both are reached (and a little longer).
const MIN_SWAPS: usize = 100;
const MIN_SWAP_FRAMES: u64 = 20_000;
/// Frames counted before the first and after the last swap.
const MARGIN_FRAMES: u64 = 1_000;
/// The swap run's sender stops here at the latest (100 s; the
/// receiver's bitmap holds SEQ_WORDS * 64 sequence numbers).
const MAX_FRAMES: u64 = 1_000_000;
/// `seq_counter.c`'s bitmap size in u64 words, and its stats slots.
const SEQ_WORDS: u32 = 16384;
const ST_FIRST: u32 = 0;
const ST_DUP: u32 = 1;
const ST_RANGE: u32 = 2;
const ST_STREAM: u32 = 3;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// sender --left-- SUT --right-- receiver. Fields drop in order: the
/// veth pairs, then the namespaces.
struct Bed {
    left: Veth,
    right: Veth,
    sender: Netns,
    sut: Netns,
    receiver: Netns,
}

fn mac_of(ns: &Netns, dev: &str) -> Mac {
    let out = ns.ip(&["-o", "link", "show", "dev", dev]).expect("ip link");
    out.split("link/ether ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("no MAC address in {out:?}"))
}

impl Bed {
    fn new() -> Bed {
        let sender = Netns::new("snd").expect("netns");
        let sut = Netns::new("sut").expect("netns");
        let receiver = Netns::new("rcv").expect("netns");
        let left = Veth::new(
            Some(&sender),
            Some("198.18.20.1/30"),
            Some(&sut),
            Some("198.18.20.2/30"),
        )
        .expect("veth sender-SUT");
        let right = Veth::new(
            Some(&sut),
            Some("198.18.21.1/30"),
            Some(&receiver),
            Some("198.18.21.2/30"),
        )
        .expect("veth SUT-receiver");
        sut.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])
            .expect("IP forwarding on the SUT");
        // No ARP in the path: the SUT knows the receiver's address.
        let rmac = mac_of(&receiver, &right.b.dev).to_string();
        sut.ip(&[
            "neigh",
            "replace",
            "198.18.21.2",
            "lladdr",
            &rmac,
            "dev",
            &right.a.dev,
            "nud",
            "permanent",
        ])
        .expect("static neighbour");
        Bed {
            left,
            right,
            sender,
            sut,
            receiver,
        }
    }

    /// The numbered flow: sender -> receiver, through the SUT.
    fn flow(&self) -> Source {
        let spec = FrameSpec {
            src_mac: Mac([0; 6]),
            dst_mac: mac_of(&self.sut, &self.left.b.dev),
            src: "198.18.20.1".parse().expect("address"),
            dst: "198.18.21.2".parse().expect("address"),
            proto: Proto::Udp,
            sport: 7000,
            dport: FLOW_PORT,
            ttl: 64,
            tos: 0,
            payload: vec![0; 32],
        };
        Source::Flows(vec![Flow {
            spec,
            src_mac_given: false,
            weight: 1,
        }])
    }
}

/// The receiver program, loaded and attached in the receiver namespace.
struct SeqCounter {
    _link: XdpLink,
    bits: KMap,
    stats: KMap,
    conf: KMap,
    _loaded: Loaded,
}

/// What the receiver saw of one stream.
#[derive(Debug, Default)]
struct Seen {
    first: u64,
    dup: u64,
    range: u64,
    stream: u64,
    /// Sequence numbers below `sent` whose bit is not set (first few).
    missing: Vec<u64>,
    missing_count: u64,
    /// Bits set at or above `sent`.
    beyond: u64,
}

fn u64_of(v: Option<Vec<u8>>) -> u64 {
    v.and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
        .map_or(0, u64::from_ne_bytes)
}

impl SeqCounter {
    fn start(bed: &Bed, scratch: &Scratch, generic: bool) -> SeqCounter {
        let src = tests_dir().join("progs/seq_counter.c");
        let obj = scratch.dir.join("seq_counter.o");
        nfkit_corpus::BpfBuild::new(&src)
            .arg("-mcpu=v3")
            .out(&obj)
            .object_file()
            .unwrap_or_else(|e| panic!("{e}"));
        let loaded = load_object_file(&obj).expect("load seq_counter.o");
        let prog = loaded.prog("seq_counter").expect("program seq_counter");
        let link = XdpLink::attach(prog, Some(&bed.receiver), &bed.right.b.dev, generic)
            .expect("attach the receiver");
        let map = |n: &str| loaded.map(n).unwrap_or_else(|| panic!("map {n}"));
        SeqCounter {
            bits: map("seq_bits"),
            stats: map("seq_stats"),
            conf: map("seq_conf"),
            _link: link,
            _loaded: loaded,
        }
    }

    /// Forgets everything and records `stream` from now on.
    fn reset(&self, stream: u32) {
        let zero = 0u64.to_ne_bytes();
        for w in 0..SEQ_WORDS {
            self.bits.update(&w.to_ne_bytes(), &zero, 0).expect("clear");
        }
        for s in 0..8u32 {
            self.stats
                .update(&s.to_ne_bytes(), &zero, 0)
                .expect("clear");
        }
        self.conf
            .update(&0u32.to_ne_bytes(), &u64::from(stream).to_ne_bytes(), 0)
            .expect("stream id");
    }

    fn stat(&self, slot: u32) -> u64 {
        u64_of(self.stats.lookup(&slot.to_ne_bytes()).expect("stats"))
    }

    /// Frames of the stream that arrived so far.
    fn arrived(&self) -> u64 {
        self.stat(ST_FIRST) + self.stat(ST_DUP) + self.stat(ST_RANGE)
    }

    fn seen(&self, sent: u64) -> Seen {
        let mut s = Seen {
            first: self.stat(ST_FIRST),
            dup: self.stat(ST_DUP),
            range: self.stat(ST_RANGE),
            stream: self.stat(ST_STREAM),
            ..Seen::default()
        };
        for w in 0..SEQ_WORDS {
            let word = u64_of(self.bits.lookup(&w.to_ne_bytes()).expect("bitmap"));
            for b in 0..64u64 {
                let n = u64::from(w) * 64 + b;
                let set = word & (1 << b) != 0;
                if n < sent && !set {
                    s.missing_count += 1;
                    if s.missing.len() < 20 {
                        s.missing.push(n);
                    }
                } else if n >= sent && set {
                    s.beyond += 1;
                }
            }
        }
        s
    }

    /// Waits until `sent` frames arrived, or until nothing arrived for
    /// a second (then the assertions say what is missing).
    fn drain(&self, sent: u64) {
        let (mut last, mut since) = (self.arrived(), Instant::now());
        while last < sent && since.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(10));
            let now = self.arrived();
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
    }
}

/// A chain version.
struct Version {
    name: String,
    text: String,
}

impl Version {
    fn compile(n: u32) -> Version {
        let path = tests_dir().join(format!("scripts/live_swap_v{n}.py"));
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("read script");
        // Checked once here, so a broken script fails before any traffic.
        let opts = nfkit_lang::Options {
            search: nfkit_nf::SearchPath::embedded(),
            hook: Some(nfkit_nf::Hook::Xdp),
        };
        nfkit_lang::compile(&name, &text, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        Version { name, text }
    }
}

/// Deploys `v` on the SUT's ingress from a thread of its own (deploy
/// enters the SUT namespace; the test's thread stays where it is).
/// Returns the outcome and the wall time of the deploy call.
fn deploy_version(
    paths: &Paths,
    bed: &Bed,
    v: &Version,
    hook: Hook,
    mode: &str,
) -> (DeployOutcome, Duration) {
    std::thread::scope(|s| {
        s.spawn(|| {
            let t = Instant::now();
            let spec = DeploySpec {
                file: &v.name,
                source: &v.text,
                source_path: &v.name,
                dev: Some(&bed.left.b.dev),
                netns: Some(bed.sut.name()),
                attach: Some(hook),
                mode: if mode == "dynamic" {
                    Mode::Dynamic
                } else {
                    Mode::Static
                },
                search: nfkit_nf::SearchPath::embedded(),
                post_devs: &[],
            };
            let out = deploy_script(paths, &spec)
                .unwrap_or_else(|e| panic!("deploy {} ({}): {e}", v.name, hook.name()))
                .outcome;
            (out, t.elapsed())
        })
        .join()
        .expect("deploy thread")
    })
}

/// `seen[0]`, `seen[1]` of the deployment.
fn read_seen(m: &KMap) -> [u64; 2] {
    [0u32, 1].map(|k| u64_of(m.lookup(&k.to_ne_bytes()).expect("seen")))
}

/// One run's results.
struct Run {
    report: SendReport,
    /// What each version counted during the run.
    counted: [u64; 2],
    swaps: Vec<(DeployOutcome, Duration)>,
    seen: Seen,
}

struct Ctx<'a> {
    bed: &'a Bed,
    paths: Paths,
    versions: [Version; 2],
    rx: SeqCounter,
    seen_map: KMap,
    hook: Hook,
    mode: &'a str,
}

impl Ctx<'_> {
    /// Sends the numbered flow (stream `stream`); with `swap`, redeploys
    /// v2, v1, v2, ... meanwhile, from when traffic flows until at least
    /// MIN_SWAPS swaps and MIN_SWAP_FRAMES frames are done, and stops
    /// sending MARGIN_FRAMES frames after the last swap.
    fn run(&self, stream: u32, swap: bool) -> Run {
        self.rx.reset(stream);
        let before = read_seen(&self.seen_map);
        let total = || {
            let now = read_seen(&self.seen_map);
            (now[0] - before[0]) + (now[1] - before[1])
        };
        let stop = Arc::new(AtomicBool::new(false));
        let opts = SendOptions {
            engine: nfkit_traffic::Engine::Packet,
            dev: self.bed.left.a.dev.clone(),
            netns: Some(self.bed.sender.name().to_string()),
            rate: Some(RATE),
            count: Some(if swap { MAX_FRAMES } else { BASELINE_FRAMES }),
            duration: None,
            seq: true,
            stream: Some(stream),
            stop: Some(stop.clone()),
        };
        let source = self.bed.flow();
        let mut swaps = Vec::new();
        let report = std::thread::scope(|s| {
            let sender = s.spawn(|| nfkit_traffic::send(&source, &opts));
            if swap {
                let wait_for = |n: u64| {
                    let t = Instant::now();
                    while total() < n && !sender.is_finished() {
                        assert!(
                            t.elapsed() < Duration::from_secs(20),
                            "the SUT counted only {} frames in 20 s",
                            total()
                        );
                        std::thread::sleep(Duration::from_millis(2));
                    }
                };
                wait_for(MARGIN_FRAMES);
                let mut next = 1;
                while (swaps.len() < MIN_SWAPS || total() < MIN_SWAP_FRAMES)
                    && !sender.is_finished()
                {
                    let v = &self.versions[next];
                    swaps.push(deploy_version(
                        &self.paths,
                        self.bed,
                        v,
                        self.hook,
                        self.mode,
                    ));
                    next ^= 1;
                }
                wait_for(total() + MARGIN_FRAMES);
                stop.store(true, Ordering::Relaxed);
            }
            sender
                .join()
                .expect("sender thread")
                .expect("send the numbered flow")
        });
        self.rx.drain(report.stamped);
        let after = read_seen(&self.seen_map);
        Run {
            counted: [after[0] - before[0], after[1] - before[1]],
            seen: self.rx.seen(report.stamped),
            report,
            swaps,
        }
    }
}

/// Every frame sent was stamped, passed by the chain (counted by one
/// version) and arrived at the receiver exactly once.
fn assert_lossless(what: &str, r: &Run) {
    let sent = r.report.sent;
    let s = &r.seen;
    assert!(sent > 0, "{what}: nothing sent");
    assert_eq!(r.report.stamped, sent, "{what}: unstamped frames");
    assert_eq!(
        r.counted[0] + r.counted[1],
        sent,
        "{what}: versions counted {:?}, {sent} sent ({} swaps)",
        r.counted,
        r.swaps.len()
    );
    assert_eq!(
        (s.missing_count, s.dup, s.range, s.beyond, s.stream),
        (0, 0, 0, 0, 0),
        "{what}: {sent} sent, receiver {s:?}"
    );
    assert_eq!(s.first, sent, "{what}: receiver {s:?}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The acceptance test for one hook and deploy mode.
fn live_swap(hook: Hook, mode: &str) {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tag = format!("live-{}-{mode}", hook.name());
    let scratch = Scratch::new(&tag);
    let bed = Bed::new();
    let versions = [Version::compile(1), Version::compile(2)];
    let paths = scratch.paths();
    let (first, _) = deploy_version(&paths, &bed, &versions[0], hook, mode);
    assert!(!first.swapped);
    let link_id = first.deployment.link_id;
    let seen_pin = first
        .deployment
        .maps
        .iter()
        .find(|m| m.name == "seen")
        .map(|m| m.pin.clone())
        .expect("map `seen` pinned");
    let ctx = Ctx {
        bed: &bed,
        rx: SeqCounter::start(&bed, &scratch, hook == Hook::XdpGeneric),
        seen_map: deploy::open_pinned_map("seen", &seen_pin).expect("open `seen`"),
        paths,
        versions,
        hook,
        mode,
    };

    // Baseline: v1 alone.
    let base = ctx.run(0x5157_0001, false);
    let what = format!("{tag} baseline");
    assert_lossless(&what, &base);
    assert_eq!(base.report.sent, BASELINE_FRAMES, "{what}");
    assert_eq!(
        base.counted[1], 0,
        "{what}: v2 counted without being deployed"
    );

    // Swaps under traffic.
    let run = ctx.run(0x5157_0002, true);
    let what = format!("{tag} swaps");
    let n = run.swaps.len();
    assert!(
        n >= MIN_SWAPS,
        "{what}: only {n} swaps before the sender stopped after {} frames",
        run.report.sent
    );
    // The test stopped the sender, after traffic flowed past the last
    // swap: every swap happened under traffic.
    assert!(
        run.report.sent < MAX_FRAMES,
        "{what}: the sender ran out of frames during the swaps"
    );
    let mut prog = first.deployment.prog_id;
    let nfs = first.deployment.dynamic.as_ref().map(|d| d.nfs.clone());
    for (i, (out, _)) in run.swaps.iter().enumerate() {
        assert!(out.swapped, "{what}: deploy {i} attached afresh");
        assert_eq!(out.deployment.link_id, link_id, "{what}: deploy {i}");
        if mode == "dynamic" {
            // The classifier stays; the NFs are the programs loaded by
            // the first deploy; only the segments change.
            assert_eq!(out.deployment.prog_id, prog, "{what}: deploy {i}");
            let d = out.deployment.dynamic.as_ref().expect("dynamic record");
            assert_eq!(
                Some(&d.nfs),
                nfs.as_ref(),
                "{what}: deploy {i} reloaded NFs"
            );
            assert!(!d.nfs.is_empty(), "{what}: no NF");
        } else {
            assert_ne!(out.deployment.prog_id, prog, "{what}: deploy {i}");
        }
        assert!(
            out.reused_maps.iter().any(|m| m == "seen"),
            "{what}: deploy {i} kept {:?}",
            out.reused_maps
        );
        prog = out.deployment.prog_id;
    }
    let st = deploy::status(&ctx.paths).expect("status");
    assert_eq!(st.len(), 1, "{what}");
    assert!(st[0].attached, "{what}");
    assert_eq!(st[0].live_prog_id, prog, "{what}: live program");
    assert!(
        run.counted[0] > 0 && run.counted[1] > 0,
        "{what}: both versions count ({:?})",
        run.counted
    );
    assert_lossless(&what, &run);

    let avg = |f: &dyn Fn(&(DeployOutcome, Duration)) -> Duration| {
        ms(run.swaps.iter().map(f).sum::<Duration>()) / n as f64
    };
    let max_wall = run.swaps.iter().map(|s| s.1).max().unwrap_or_default();
    eprintln!(
        "{tag}: baseline {} frames; swap run {} frames in {:.2} s, {n} swaps, \
         versions {:?}; per deploy: wall {:.2} ms (max {:.2}), load+attach {:.2} ms, \
         link update {:.3} ms",
        base.report.sent,
        run.report.sent,
        run.report.seconds,
        run.counted,
        avg(&|s| s.1),
        ms(max_wall),
        avg(&|s| s.0.load_time),
        avg(&|s| s.0.switch_time),
    );
    deploy::undeploy(&ctx.paths, None).expect("undeploy");
}

#[test]
fn live_swap_native_xdp_static() {
    live_swap(Hook::Xdp, "static");
}

#[test]
fn live_swap_generic_xdp_static() {
    live_swap(Hook::XdpGeneric, "static");
}

#[test]
fn live_swap_native_xdp_dynamic() {
    live_swap(Hook::Xdp, "dynamic");
}

#[test]
fn live_swap_generic_xdp_dynamic() {
    live_swap(Hook::XdpGeneric, "dynamic");
}
