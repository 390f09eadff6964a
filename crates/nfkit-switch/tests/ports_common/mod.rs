//! Shared by the live port tests: namespaces joined by a veth pair
//! (removed on drop, also when a test panics), test frames that carry a
//! marker and a sequence number, and collecting them from RX queues.

#![allow(dead_code)]

use nfkit_kernel::testbed::{ip, Netns};
use nfkit_switch::port::open::open_live;
use nfkit_switch::port::{Batch, OpenPort, OutFrame, PortError, PortSpec, RxQueue};
use nfkit_traffic::frame::{build, FrameSpec, Mac, Proto};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// Live ports need root (namespaces, raw sockets, XDP): false, with a
/// note, when the test must skip.
pub fn root() -> bool {
    let root = nfkit_kernel::is_root();
    if !root {
        eprintln!("skipped: needs root");
    }
    root
}

/// A fresh short name (interface names are at most 15 bytes).
pub fn unique(tag: &str) -> String {
    let n = SERIAL.fetch_add(1, Ordering::Relaxed);
    let mut s = format!("np{}{}{}", std::process::id() % 100_000, tag, n % 100);
    s.truncate(15);
    s
}

/// Two namespaces and a veth pair between them (`a` in `ns_a`, `b` in
/// `ns_b`) with `queues` queues per direction on both ends, both up.
pub struct Pair {
    pub a: String,
    pub b: String,
    pub ns_a: Netns,
    pub ns_b: Netns,
}

impl Pair {
    pub fn new(queues: u32) -> Pair {
        let ns_a = Netns::new("pa").expect("netns a");
        let ns_b = Netns::new("pb").expect("netns b");
        let (a, b) = (unique("a"), unique("b"));
        let q = queues.to_string();
        ip(&[
            "link",
            "add",
            &a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])
        .expect("veth pair");
        let pair = Pair { a, b, ns_a, ns_b };
        // From here on, `pair` removes the veth on any failure.
        ip(&["link", "set", &pair.a, "netns", pair.ns_a.name()]).expect("move a");
        ip(&["link", "set", &pair.b, "netns", pair.ns_b.name()]).expect("move b");
        pair.ns_a.ip(&["link", "set", &pair.a, "up"]).expect("a up");
        pair.ns_b.ip(&["link", "set", &pair.b, "up"]).expect("b up");
        // A veth passes traffic once both ends report UP.
        let t0 = Instant::now();
        for (ns, dev) in [(&pair.ns_a, &pair.a), (&pair.ns_b, &pair.b)] {
            while !ns
                .ip(&["-o", "link", "show", "dev", dev])
                .unwrap_or_default()
                .contains("state UP")
                && t0.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        pair
    }

    /// `ip -o link show dev A` in `ns_a`.
    pub fn link_a(&self) -> String {
        self.ns_a
            .ip(&["-o", "link", "show", "dev", &self.a])
            .unwrap_or_default()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = self.ns_a.ip(&["link", "del", &self.a]);
    }
}

/// Runs `f` on a thread that entered namespace `ns` (panics pass on).
pub fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            nfkit_kernel::netns::enter_netns(ns.name()).expect("enter netns");
            f()
        });
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// Opens `spec` inside `ns` (the port's sockets stay there).
pub fn open_in(ns: &Netns, spec: &PortSpec, workers: usize) -> Result<OpenPort, PortError> {
    in_ns(ns, || open_live(spec, workers))
}

const MARK: &[u8; 8] = b"NFKITPRT";

/// Test frame `seq` (UDP over IPv4; the source port varies so flows
/// spread over queues and fanout members), `extra` payload bytes.
pub fn frame(seq: u32, extra: usize) -> Vec<u8> {
    let mut payload = MARK.to_vec();
    payload.extend_from_slice(&seq.to_be_bytes());
    payload.extend((0..extra).map(|i| (i as u8) ^ (seq as u8)));
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 2]),
        dst_mac: Mac([2, 0, 0, 0, 0, 1]),
        src: IpAddr::V4(Ipv4Addr::new(198, 18, 7, 2)),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 7, 1)),
        proto: Proto::Udp,
        sport: 1000 + (seq % 512) as u16,
        dport: 4000,
        ttl: 64,
        tos: 0,
        payload,
    })
    .expect("frame")
}

/// The sequence number of a test frame (None for other traffic, such
/// as the IPv6 the kernel sends on a new link).
pub fn seq_of(frame: &[u8]) -> Option<u32> {
    let at = frame.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    let b = frame.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Sends `frames` from `dev` in `ns` through a raw packet socket.
pub fn send_from(ns: &Netns, dev: &str, frames: &[Vec<u8>]) {
    let tx = nfkit_traffic::send::FrameSender::open(dev, Some(ns.name())).expect("sender");
    for f in frames {
        tx.send(f).expect("send");
    }
}

/// Test frames received per queue, by sequence number (every copy).
pub type Seen = BTreeMap<u32, Vec<(usize, Vec<u8>)>>;

/// Reads the queues until `want` test frames came or `patience` passed
/// without a new one; returns them by sequence number with the queue
/// index that delivered each.
pub fn collect(queues: &mut [Box<dyn RxQueue>], want: usize, patience: Duration) -> Seen {
    let mut seen = Seen::new();
    let mut got = 0;
    let mut batch = Batch::new();
    let mut last = Instant::now();
    while got < want && last.elapsed() < patience {
        for (q, rx) in queues.iter_mut().enumerate() {
            let n = rx
                .recv(&mut batch, Duration::from_millis(20))
                .expect("recv");
            assert!(n <= nfkit_switch::port::BATCH && n == batch.len);
            for f in &batch.frames[..n] {
                if let Some(s) = seq_of(f) {
                    seen.entry(s).or_default().push((q, f.clone()));
                    got += 1;
                    last = Instant::now();
                }
            }
        }
    }
    seen
}

/// Asserts that `seen` holds each of `frames` exactly once, byte for
/// byte.
pub fn assert_each_once(seen: &Seen, frames: &[Vec<u8>]) {
    assert_eq!(
        seen.len(),
        frames.len(),
        "distinct test frames received: {:?}",
        seen.keys().collect::<Vec<_>>()
    );
    for (i, f) in frames.iter().enumerate() {
        let copies = seen.get(&(i as u32)).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(copies.len(), 1, "frame {i} seen {} times", copies.len());
        assert_eq!(&copies[0].1, f, "frame {i} bytes");
    }
}

/// Sends `frames` through `tx`, retrying what the queue did not take.
pub fn send_all(tx: &mut dyn nfkit_switch::port::TxQueue, frames: &[Vec<u8>]) {
    let out: Vec<OutFrame<'_>> = frames
        .iter()
        .map(|f| OutFrame {
            data: f,
            arrival_ns: 0,
        })
        .collect();
    let mut done = 0;
    let t0 = Instant::now();
    while done < out.len() {
        let end = (done + nfkit_switch::port::BATCH).min(out.len());
        done += tx.send(&out[done..end]).expect("send");
        tx.flush().expect("flush");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "transmit queue stuck"
        );
        if done < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    tx.flush().expect("flush");
}
