//! The kernel filter (the chain script attached to a real UDP socket in
//! a fresh network namespace) and the user-space check decide alike,
//! datagram by datagram, on 100,000 random datagrams, for filter v1 and
//! for v2 (with its key limit). The sender waits for the receiver after
//! each batch, so no datagram is lost to a full queue: every difference
//! is a decision. Needs root (skipped otherwise).

use nfkit_bag::filter::{KernelFilter, FILTER_V1, FILTER_V2, V2_KEY_LIMIT};
use nfkit_bag::sys;
use nfkit_bag::wire::{Check, Command};
use nfkit_kernel::netns::enter_netns;
use nfkit_kernel::testbed::Netns;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// xorshift64*: reproducible random numbers without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A random datagram: valid commands, near misses (one byte changed, cut
/// short, one byte more, wrong case), random bytes, empty.
fn datagram(r: &mut Rng) -> Vec<u8> {
    let key = if r.below(2) == 0 {
        r.below(2 * u64::from(V2_KEY_LIMIT)) as u32
    } else {
        r.next() as u32
    };
    let valid = match r.below(4) {
        0 => Command::Put {
            key,
            value: r.next(),
        },
        1 => Command::Get { key },
        2 => Command::Delete { key },
        _ => Command::Stop,
    }
    .encode();
    let mut d = valid.clone();
    match r.below(10) {
        0..=3 => {}
        4 => {
            let i = r.below(d.len() as u64) as usize;
            d[i] ^= 1 << r.below(8);
        }
        5 => {
            d.truncate(r.below(d.len() as u64) as usize);
        }
        6 => {
            for _ in 0..=r.below(3) {
                d.push(r.next() as u8);
            }
        }
        7 => d[0] = d[0].to_ascii_lowercase(),
        8 => {
            let n = r.below(24) as usize;
            d = (0..n).map(|_| r.next() as u8).collect();
        }
        _ => {
            // Another command's bytes with this one's length.
            let other = [&b"PUT"[..], b"GET", b"DELETE", b"STOP", b"BAD"][r.below(5) as usize];
            for (i, b) in other.iter().enumerate() {
                if i < d.len() {
                    d[i] = *b;
                }
            }
        }
    }
    d
}

/// Sends `n` random datagrams (seed `seed`) through `filter` on a socket
/// in namespace `ns`; the payloads received, in order, and the filter's
/// counters.
fn through_kernel(
    ns: &str,
    filter: &KernelFilter,
    check: Check,
    n: usize,
    seed: u64,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, nfkit_bag::filter::Counters, u64) {
    let mut r = Rng(seed);
    let sent: Vec<Vec<u8>> = (0..n).map(|_| datagram(&mut r)).collect();
    let got_count = AtomicU64::new(0);
    let (addr_tx, addr_rx) = mpsc::channel();
    let (got, drops) = std::thread::scope(|s| {
        let recv = s.spawn(|| {
            enter_netns(ns).expect("enter netns");
            let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
            sys::set_rcvbuf(sock.as_raw_fd(), 4 << 20).expect("rcvbuf");
            filter.reset_counters().expect("reset");
            filter.attach(&sock).expect("attach");
            sock.set_read_timeout(Some(Duration::from_millis(300)))
                .expect("timeout");
            addr_tx
                .send(sock.local_addr().expect("addr"))
                .expect("ready");
            let mut got = Vec::new();
            let mut buf = [0u8; 256];
            // Ends on a 300 ms silence after the sender is done.
            while let Ok(k) = sock.recv(&mut buf) {
                got.push(buf[..k].to_vec());
                got_count.fetch_add(1, Ordering::Release);
            }
            (got, sys::socket_drops(sock.as_raw_fd()).expect("drops"))
        });
        let addr = addr_rx.recv().expect("receiver ready");
        enter_netns(ns).expect("enter netns (sender)");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind sender");
        tx.connect(addr).expect("connect");
        let mut kept = 0u64;
        for batch in sent.chunks(500) {
            for d in batch {
                tx.send(d).expect("send");
            }
            kept += batch.iter().filter(|d| check.keeps(d)).count() as u64;
            let t = Instant::now();
            // Wait for the receiver to catch up (the kernel keeps at
            // least what the user check keeps, else the test fails below).
            while got_count.load(Ordering::Acquire) < kept && t.elapsed() < Duration::from_secs(2) {
                std::thread::yield_now();
            }
        }
        recv.join().expect("receiver")
    });
    let want: Vec<Vec<u8>> = sent.iter().filter(|d| check.keeps(d)).cloned().collect();
    let counters = filter.counters().expect("counters");
    (got, want, counters, drops)
}

fn same_decisions(name: &str, source: &str, check: Check, seed: u64) {
    let filter = KernelFilter::compile(name, source).unwrap_or_else(|e| panic!("{e}"));
    let ns = Netns::new("bagk").expect("netns");
    let n = 100_000;
    let (got, want, c, drops) = through_kernel(ns.name(), &filter, check, n, seed);
    let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(
        (got.len(), first_diff),
        (want.len(), None),
        "{name}: kernel kept {} datagrams, the user check {}; first difference at {:?}: kernel {:?} user {:?}",
        got.len(),
        want.len(),
        first_diff,
        first_diff.map(|i| &got[i]),
        first_diff.map(|i| &want[i]),
    );
    assert_eq!(c.total(), n as u64, "{name}: the filter saw every datagram");
    assert_eq!(c.valid, want.len() as u64, "{name}: valid counter");
    assert_eq!(drops, c.dropped(), "{name}: socket drops are the filter's");
    // A test that can fail: both kinds are well represented.
    assert!(
        want.len() > n / 10 && want.len() < n * 9 / 10,
        "{}",
        want.len()
    );
}

#[test]
fn kernel_filter_v1_decides_as_the_user_check() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    same_decisions(
        "filter.py",
        FILTER_V1,
        Check::default(),
        0x9e37_79b9_7f4a_7c15,
    );
}

#[test]
fn kernel_filter_v2_decides_as_the_user_check_with_a_key_limit() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let check = Check {
        key_limit: Some(V2_KEY_LIMIT),
    };
    same_decisions("filter_v2.py", FILTER_V2, check, 0x1234_5678_9abc_def1);
}
