//! Pattern filters from `nfkit dpi compile -o NF.o` on live traffic:
//! UDP datagrams sent by a peer namespace's stack over a veth pair
//! (MTU 9000) to a socket in the SUT namespace; the datagrams the socket
//! receives must be exactly those whose payload the `regex` crate finds
//! no pattern in.
//!
//! * `--hook socket`: the object attached to the receiving socket
//!   (`nfkit_kernel::attach_socket_filter`; `nfkit deploy` refuses socket
//!   filters, a socket belongs to its process);
//! * `--hook tc` deployed at TC ingress of the SUT's veth end with
//!   `nfkit deploy NF.o --hook tc-ingress`, payloads to 8,900 bytes with
//!   patterns at random offsets, beyond 1,500 too (the `bpf_loop` scan
//!   over a jumbo skb);
//! * `--hook xdp` the same in the generic XDP path (`xdp-generic`);
//! * a pattern-filter script (`Patterns` in the script) deployed at TC
//!   ingress in static and in dynamic mode, then swapped live for one
//!   with other patterns: each version drops what its own patterns match
//!   (the new DFA tables take effect at the swap).
//!
//! Needs root (skipped otherwise).

mod common;
use common::{is_root, nfkit_ok, Pair, Scratch, NFKIT};
use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::catalogue;
use nfkit_kernel::deploy::enter_netns;
use nfkit_kernel::{attach_socket_filter, load_image, LoadOptions};
use regex::bytes::{Regex, RegexBuilder};
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

const SUT: Ipv4Addr = Ipv4Addr::new(198, 18, 121, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 121, 2);
const PORT: u16 = 7020;

/// Strings the `sqli` patterns match, spliced into payloads.
const SAMPLES: &[&[u8]] = &[
    b"UNION SELECT",
    b"union/**/all/**/select",
    b" or 1=1",
    b"'OR+'1'%3d'1",
    b";drop ",
    b"'--",
    b"sleep(",
    b"WAITFOR DELAY '",
];

/// `n` payloads of 4 to `max` bytes: a 4-byte id (big-endian index),
/// then letters, spaces and punctuation, half of them with a pattern
/// sample at a random offset.
fn payloads(n: usize, max: usize, seed: u64) -> Vec<Vec<u8>> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ=+'%;-/*()0123456789\r\n";
    let mut g = Gen(seed);
    (0..n)
        .map(|i| {
            let len = 4 + g.index(max - 4);
            let mut p = (i as u32).to_be_bytes().to_vec();
            while p.len() < len {
                p.push(ALPHABET[g.index(ALPHABET.len())]);
            }
            if g.index(2) == 0 {
                let s = SAMPLES[g.index(SAMPLES.len())];
                let at = 4 + g.index(len.saturating_sub(4 + s.len()).max(1));
                let end = (at + s.len()).min(p.len());
                p.splice(at..end, s.iter().copied());
            }
            p
        })
        .collect()
}

/// Ids of the payloads no `sqli` pattern matches (the `regex` crate).
fn unmatched(payloads: &[Vec<u8>]) -> BTreeSet<u32> {
    unmatched_by(payloads, catalogue::SQLI.patterns)
}

/// Ids of the payloads none of `patterns` matches (the `regex` crate).
fn unmatched_by(payloads: &[Vec<u8>], patterns: &[&str]) -> BTreeSet<u32> {
    let res: Vec<Regex> = patterns
        .iter()
        .map(|p| {
            RegexBuilder::new(p)
                .unicode(false)
                .build()
                .expect("reference regex")
        })
        .collect();
    let keep: BTreeSet<u32> = payloads
        .iter()
        .enumerate()
        .filter(|(_, p)| !res.iter().any(|r| r.is_match(p)))
        .map(|(i, _)| i as u32)
        .collect();
    assert!(
        keep.len() * 10 > payloads.len() && keep.len() * 10 < payloads.len() * 9,
        "a test that can fail: {} of {} payloads match nothing",
        keep.len(),
        payloads.len()
    );
    keep
}

/// SUT and peer namespaces joined by a veth pair with MTU 9000, fixed
/// MACs and permanent neighbours (no ARP queue to overflow).
fn bed() -> Pair {
    let pair = Pair::new("dpisut", "dpipeer", "198.18.121");
    for (ns, dev) in [
        (&pair.sut, &pair.veth.a.dev),
        (&pair.peer, &pair.veth.b.dev),
    ] {
        ns.ip(&["link", "set", dev, "mtu", "9000"]).expect("mtu");
    }
    pair.pin_neighbours("198.18.121", 0x21);
    pair
}

/// In the SUT namespace: binds the socket (attaching `filter` when
/// given), says ready, and gives the ids of the datagrams it receives
/// (each must be whole and come once) until nothing more comes for
/// 300 ms after `want` arrived, or 10 s.
fn receive(
    sut_ns: &str,
    payloads: &[Vec<u8>],
    filter: Option<&nfkit_kernel::Prog>,
    want: usize,
    ready: std::sync::mpsc::Sender<()>,
) -> BTreeSet<u32> {
    enter_netns(sut_ns).expect("enter sut");
    let sock = UdpSocket::bind(SocketAddrV4::new(SUT, PORT)).expect("bind");
    if let Some(p) = filter {
        attach_socket_filter(&sock, p).expect("attach the socket filter");
    }
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    ready.send(()).expect("ready");
    let mut got = BTreeSet::new();
    let mut buf = vec![0u8; 65536];
    let t0 = Instant::now();
    let mut quiet_since = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                assert!(n >= 4, "short datagram");
                let id = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let sent = payloads.get(id as usize).expect("a datagram we sent");
                assert_eq!(&buf[..n], &sent[..], "datagram {id} arrives whole");
                assert!(got.insert(id), "datagram {id} twice");
                quiet_since = Instant::now();
            }
            Err(_) if got.len() >= want && quiet_since.elapsed() > Duration::from_millis(300) => {
                break
            }
            Err(_) => {}
        }
    }
    got
}

/// The ids of `payloads` the SUT's socket receives when the peer sends
/// them all (paced, so that the socket's buffer never overflows).
fn delivered(
    bed: &Pair,
    payloads: &[Vec<u8>],
    filter: Option<&nfkit_kernel::Prog>,
    want: usize,
) -> BTreeSet<u32> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let sut_ns = bed.sut.name();
    std::thread::scope(|s| {
        let receiver = s.spawn(move || receive(sut_ns, payloads, filter, want, ready_tx));
        ready_rx.recv().expect("receiver ready");
        s.spawn(|| {
            enter_netns(bed.peer.name()).expect("enter peer");
            let sock = UdpSocket::bind(SocketAddrV4::new(PEER, 0)).expect("bind peer");
            for p in payloads {
                sock.send_to(p, SocketAddrV4::new(SUT, PORT)).expect("send");
                std::thread::sleep(Duration::from_micros(300));
            }
        })
        .join()
        .expect("sender");
        receiver.join().expect("receiver")
    })
}

/// `nfkit dpi compile sqli -o DIR/sqli_HOOK.o --hook HOOK --limit 9000`.
fn compile_object(s: &Scratch, hook: &str) -> String {
    let obj = s.dir.join(format!("sqli_{hook}.o"));
    let obj = obj.to_str().expect("utf-8 path").to_string();
    let out = std::process::Command::new(NFKIT)
        .args([
            "dpi", "compile", "sqli", "-o", &obj, "--hook", hook, "--limit", "9000",
        ])
        .output()
        .expect("nfkit");
    assert!(
        out.status.success(),
        "dpi compile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    obj
}

#[test]
fn a_socket_filter_on_a_live_socket_delivers_exactly_what_matches_nothing() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dpisock");
    let obj = compile_object(&s, "socket");
    let bytes = std::fs::read(&obj).expect("object");
    let img = nfkit_object::Image::from_elf(&bytes, "sqli_socket.o").expect("read object");
    let entry = img.entries[0].name.clone();
    let loaded = load_image(&img, &LoadOptions::default()).expect("the kernel loads the filter");
    let prog = loaded.prog(&entry).expect("entry");
    let payloads = payloads(400, 1400, 0xd1_50c4);
    let want = unmatched(&payloads);
    let bed = bed();
    let got = delivered(&bed, &payloads, Some(prog), want.len());
    assert_eq!(
        got.symmetric_difference(&want).collect::<Vec<_>>(),
        Vec::<&u32>::new(),
        "datagrams delivered through the filter / not matched by the regex crate"
    );
}

/// Deploys the `hook` object at `at` on the SUT's veth end and checks
/// that exactly the jumbo datagrams matching nothing arrive.
fn jumbo_through(hook: &str, at: &str, seed: u64) {
    let s = Scratch::new(&format!("dpi{hook}"));
    let obj = compile_object(&s, hook);
    let bed = bed();
    let dev = bed.veth.a.dev.clone();
    nfkit_ok(&bed.sut, &s, &["deploy", &obj, "--dev", &dev, "--hook", at]);
    let payloads = payloads(300, 8900, seed);
    let beyond = payloads.iter().filter(|p| p.len() > 1500).count();
    assert!(beyond > 200, "{beyond} payloads over 1500 bytes");
    let want = unmatched(&payloads);
    let got = delivered(&bed, &payloads, None, want.len());
    nfkit_ok(&bed.sut, &s, &["undeploy", "--dev", &dev]);
    assert_eq!(
        got.symmetric_difference(&want).collect::<Vec<_>>(),
        Vec::<&u32>::new(),
        "{hook} at {at}: datagrams delivered / not matched by the regex crate"
    );
}

#[test]
fn jumbo_datagrams_through_the_tc_filter_are_dropped_exactly_when_they_match() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    jumbo_through("tc", "tc-ingress", 0x7c_0001);
}

#[test]
fn jumbo_datagrams_through_the_generic_xdp_filter_are_dropped_exactly_when_they_match() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    jumbo_through("xdp", "xdp-generic", 0x7c_0002);
}

/// Other patterns for the swap.
const OTHER: &[&str] = &[r"(?i)union", r"sleep\(", r"[0-9]{3}"];

/// Deploys a filter script for `first` in `mode`, swaps it live for one
/// for `second`; what arrives follows the patterns of the version
/// deployed.
fn swap_in(mode: &str) {
    let s = Scratch::new(&format!("dpiswap{mode}"));
    let bed = bed();
    let dev = bed.veth.a.dev.clone();
    let payloads = payloads(250, 1400, 0x5a_0001);
    for (name, pats) in [("first", catalogue::SQLI.patterns), ("second", OTHER)] {
        let owned: Vec<String> = pats.iter().map(|p| p.to_string()).collect();
        let script = nfkit_lang::patterns::filter_script(&owned, 0, nfkit_nf::Hook::Tc);
        let path = s.dir.join(format!("{name}.py"));
        std::fs::write(&path, script).expect("script");
        let path = path.to_str().expect("utf-8 path").to_string();
        nfkit_ok(
            &bed.sut,
            &s,
            &[
                "deploy",
                &path,
                "--dev",
                &dev,
                "--hook",
                "tc-ingress",
                "--mode",
                mode,
            ],
        );
        let want = unmatched_by(&payloads, pats);
        let got = delivered(&bed, &payloads, None, want.len());
        assert_eq!(
            got.symmetric_difference(&want).collect::<Vec<_>>(),
            Vec::<&u32>::new(),
            "{mode} mode, {name} version: datagrams delivered / not matched by the regex crate"
        );
    }
    nfkit_ok(&bed.sut, &s, &["undeploy", "--dev", &dev]);
}

#[test]
fn a_static_deployment_swapped_live_filters_with_the_new_patterns() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    swap_in("static");
}

#[test]
fn a_dynamic_deployment_swapped_live_filters_with_the_new_patterns() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    swap_in("dynamic");
}
