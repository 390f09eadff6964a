//! Numbered traffic through a never-ending port: every frame carries
//! its number (payload bytes 0..4, little endian); each worker's
//! transmit queue keeps (number, payload byte 4) of what it sent, so a
//! test can check every frame went out exactly once and which version
//! marked it.

use super::udp4;
use nfkit_switch::port::{Batch, OpenPort, OutFrame, PortError, PortStats, RxQueue, TxQueue};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Numbered frames from a counter shared by every queue, at `rate`
/// frames per ms (at most `cap` in all) while `on`; never finishes.
struct Numbered {
    next: Arc<AtomicU32>,
    on: Arc<AtomicBool>,
    start: Instant,
    rate: u64,
    cap: u64,
}

impl RxQueue for Numbered {
    fn recv(&mut self, batch: &mut Batch, _timeout: Duration) -> Result<usize, PortError> {
        batch.len = 0;
        // Small batches: the traffic lasts through every update.
        while batch.len < 8 {
            let n = self.next.load(Ordering::SeqCst);
            let due = (self.start.elapsed().as_micros() as u64 * self.rate / 1000).min(self.cap);
            if !self.on.load(Ordering::SeqCst) || u64::from(n) >= due {
                break;
            }
            if self
                .next
                .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                continue;
            }
            let mut payload = n.to_le_bytes().to_vec();
            payload.extend_from_slice(&[0, 0, 0, 0]);
            let f = udp4(
                [10, 1, (n >> 8) as u8, n as u8],
                [10, 2, 0, 1],
                1000 + (n % 7) as u16,
                53,
                0,
                64,
                &payload,
            );
            let b = &mut batch.frames[batch.len];
            b.clear();
            b.extend_from_slice(&f);
            batch.arrival_ns[batch.len] = 0;
            batch.len += 1;
        }
        Ok(batch.len)
    }
}

/// (number, mark) of the frames a queue sent.
type Sent = Arc<Mutex<Vec<(u32, u8)>>>;

/// Keeps (number, mark) of every frame sent.
struct Record(Sent);

impl TxQueue for Record {
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError> {
        let mut out = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for f in frames {
            let d = f.data;
            let n = u32::from_le_bytes([d[42], d[43], d[44], d[45]]);
            out.push((n, d[46]));
        }
        Ok(frames.len())
    }
}

/// The traffic of one test: the port to give the switch, and what went
/// out of it.
pub struct Traffic {
    next: Arc<AtomicU32>,
    on: Arc<AtomicBool>,
    sent: Vec<Sent>,
}

impl Traffic {
    /// A port with `queues` receive queues (numbered frames at `rate`
    /// per ms, at most `cap`) and a recording transmit queue for each of
    /// `workers` workers.
    pub fn port(workers: usize, queues: usize, rate: u64, cap: u64) -> (Traffic, OpenPort) {
        let next = Arc::new(AtomicU32::new(0));
        let on = Arc::new(AtomicBool::new(true));
        let start = Instant::now();
        let sent: Vec<_> = (0..workers)
            .map(|_| Arc::new(Mutex::new(Vec::with_capacity(cap as usize))))
            .collect();
        let port = OpenPort {
            spec: "live:afpacket".parse().expect("spec"),
            ifindex: 1,
            rx: (0..queues)
                .map(|_| {
                    Box::new(Numbered {
                        next: Arc::clone(&next),
                        on: Arc::clone(&on),
                        start,
                        rate,
                        cap,
                    }) as Box<dyn RxQueue>
                })
                .collect(),
            tx: sent
                .iter()
                .map(|s| Box::new(Record(Arc::clone(s))) as Box<dyn TxQueue>)
                .collect(),
            close: Some(Box::new(|| Ok(PortStats::default()))),
        };
        (Traffic { next, on, sent }, port)
    }

    /// Stops the source; gives how many frames it gave.
    pub fn stop(&self) -> u64 {
        self.on.store(false, Ordering::SeqCst);
        u64::from(self.next.load(Ordering::SeqCst))
    }

    /// Frames given so far.
    pub fn given(&self) -> u64 {
        u64::from(self.next.load(Ordering::SeqCst))
    }

    /// Every (number, mark) sent, sorted by number.
    pub fn out(&self) -> Vec<(u32, u8)> {
        let mut out: Vec<(u32, u8)> = self
            .sent
            .iter()
            .flat_map(|s| std::mem::take(&mut *s.lock().unwrap_or_else(|p| p.into_inner())))
            .collect();
        out.sort_unstable();
        out
    }
}

/// The `p` quantile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Stops the traffic, waits (at most 30 s) until every frame given went
/// out of port 0, stops the switch; gives the frames given, the final
/// stats and (number, mark) of every frame out.
pub fn finish(
    sw: nfkit_switch::Switch,
    traffic: &Traffic,
) -> (u64, nfkit_switch::Stats, Vec<(u32, u8)>) {
    traffic.stop();
    let t = Instant::now();
    let given = loop {
        let n = traffic.given();
        if sw.stats().ports[0].tx == n || t.elapsed() > Duration::from_secs(30) {
            break n;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    sw.stop();
    let (stats, _) = sw.finish().expect("finish");
    (given, stats, traffic.out())
}

/// Asserts that the frames out are exactly those given, each once and in
/// order (numbers 0, 1, ... `given - 1`).
pub fn assert_each_once(out: &[(u32, u8)], given: u64) {
    assert_eq!(out.len() as u64, given, "frames out vs frames given");
    for (i, (n, _)) in out.iter().enumerate() {
        assert_eq!(*n as usize, i, "frame {i} lost or duplicated");
    }
}

/// Frames each version ran, by version number.
pub fn frames_per_version(stats: &nfkit_switch::Stats) -> std::collections::BTreeMap<u64, u64> {
    stats
        .versions
        .iter()
        .map(|v| (v.version, v.frames))
        .collect()
}
