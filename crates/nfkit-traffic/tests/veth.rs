//! Kernel test (root): frames sent with `send` from one namespace across
//! a veth pair arrive, every one, at a `Receiver` in the other, and the
//! sequence accounting sees exactly what was sent, lost or duplicated.
//! The testbed's guards remove namespaces and links even on failure.

use nfkit_kernel::Testbed;
use nfkit_traffic::frame::{FrameSpec, Mac, Proto};
use nfkit_traffic::send::Source;
use nfkit_traffic::{
    build, parse_flows, send, seq, Receiver, RecvOptions, RecvReport, SendOptions,
};
use std::time::{Duration, Instant};

use nfkit_kernel::is_root;

fn ip_of(cidr: &Option<String>) -> String {
    cidr.as_deref()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

/// Waits until `rx` has `n` frames from `src` (or 10 s), lets stragglers
/// arrive for 200 ms, and stops it.
fn collect(rx: Receiver, src: &str, n: u64) -> RecvReport {
    let start = Instant::now();
    while rx.snapshot().by_source.get(src).copied().unwrap_or(0) < n
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    rx.finish().unwrap()
}

#[test]
fn n_frames_across_a_veth_pair_arrive_exactly_once_in_order() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tb = Testbed::pair().unwrap();
    let (a, b) = (ip_of(&tb.veth.a.addr), ip_of(&tb.veth.b.addr));
    let rx = Receiver::start(&RecvOptions {
        dev: tb.veth.b.dev.clone(),
        netns: Some(tb.ns_b.name().to_string()),
        ..RecvOptions::default()
    })
    .unwrap();
    let flows = parse_flows(&format!(
        "src={a},dst={b},sport=1000,dport=2000,len=32,weight=2;proto=udp,src={a},dst={b},len=100;\
         src=2001:db8::1,dst=2001:db8::2,len=20;proto=tcp,src={a},dst={b},len=20"
    ))
    .unwrap();
    let n = 2000;
    let report = send(
        &Source::Flows(flows),
        &SendOptions {
            dev: tb.veth.a.dev.clone(),
            netns: Some(tb.ns_a.name().to_string()),
            rate: Some(20_000.0),
            count: Some(n),
            seq: true,
            stream: Some(77),
            ..SendOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.sent, n);
    // Per round of 5 frames: 3 IPv4 UDP, 1 IPv6 UDP (stamped), 1 TCP.
    assert_eq!(report.stamped, n / 5 * 4);
    let r = collect(rx, &a, n / 5 * 4);
    assert_eq!(r.by_source.get(&a).copied(), Some(n / 5 * 4), "{r:?}");
    assert_eq!(
        r.by_source.get("2001:db8::1").copied(),
        Some(n / 5),
        "{r:?}"
    );
    let s: Vec<_> = r.streams.iter().filter(|s| s.stream == 77).collect();
    assert_eq!(s.len(), 1, "{r:?}");
    assert_eq!(s[0].received, n / 5 * 4);
    assert_eq!(s[0].missing, 0);
    assert_eq!(s[0].duplicates, 0);
    assert_eq!(s[0].reordered, 0, "{r:?}");
    // Only stamped frames take a number: 0..n/5*4.
    assert_eq!(s[0].highest, n / 5 * 4 - 1);
    // TCP frames are IP but carry no stamp; frames from the sender's own
    // kernel (IPv6 neighbour discovery) may add to `unstamped`.
    assert!(r.unstamped >= n / 5, "{r:?}");
}

#[test]
fn gaps_and_duplicates_are_counted() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tb = Testbed::pair().unwrap();
    let (a, b) = (ip_of(&tb.veth.a.addr), ip_of(&tb.veth.b.addr));
    let base = build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac::BROADCAST,
        src: a.parse().unwrap(),
        dst: b.parse().unwrap(),
        proto: Proto::Udp,
        sport: 5,
        dport: 6,
        ttl: 64,
        tos: 0,
        payload: vec![0; 16],
    })
    .unwrap();
    // 0..=9 without 3 and 7, 5 twice, 1 after 4 (reordered), then 9 three times.
    let seqs = [0u64, 2, 4, 1, 5, 5, 6, 8, 9, 9, 9];
    let frames: Vec<Vec<u8>> = seqs
        .iter()
        .map(|&n| {
            let mut f = base.clone();
            assert!(seq::stamp(&mut f, 5, n));
            f
        })
        .collect();
    let rx = Receiver::start(&RecvOptions {
        dev: tb.veth.b.dev.clone(),
        netns: Some(tb.ns_b.name().to_string()),
        ..RecvOptions::default()
    })
    .unwrap();
    let report = send(
        &Source::Frames(frames),
        &SendOptions {
            dev: tb.veth.a.dev.clone(),
            netns: Some(tb.ns_a.name().to_string()),
            ..SendOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.sent, seqs.len() as u64);
    let r = collect(rx, &a, seqs.len() as u64);
    let s = r.streams.iter().find(|s| s.stream == 5).expect("stream 5");
    assert_eq!(
        (s.received, s.missing, s.duplicates, s.reordered, s.highest),
        (8, 2, 3, 1, 9),
        "{s:?}"
    );
}

#[test]
fn a_missing_interface_or_namespace_is_a_clear_error() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let opts = RecvOptions {
        dev: "nfkit-none0".into(),
        ..RecvOptions::default()
    };
    let e = Receiver::start(&opts)
        .err()
        .expect("no such interface")
        .to_string();
    assert!(e.contains("nfkit-none0"), "{e}");
    let e = send(
        &Source::Frames(vec![vec![0; 60]]),
        &SendOptions {
            dev: "lo".into(),
            netns: Some("nfkit-no-such-ns".into()),
            ..SendOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nfkit-no-such-ns"), "{e}");
}
