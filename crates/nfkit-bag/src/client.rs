//! The clients: the seed's behaviours (Thor, Odin, Loki, Njord, Sylvie,
//! Sif, Frey, Frigg), with an optional sending rate. Every PUT carries
//! a sequence number as its value (0, 1, 2, ... in sending order) and
//! a key `seq % keys` unless the behaviour names its key, so the server
//! can count exactly which valid requests arrived.

use crate::error::{io, BagError};
use crate::sys::{self, CpuTime};
use crate::wire::{bad, Command};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// A client behaviour (names as in the seed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// PUTs, then STOP.
    Thor,
    /// PUT and GET alternating, then STOP.
    Odin,
    /// PUT, an invalid `BAD`, GET, repeated, then STOP.
    Loki,
    /// PUT, GET and two DELETEs of one key, repeated, then STOP.
    Njord,
    /// Many PUTs (10 million unless `--packets`), then STOP.
    Sylvie,
    /// PUT and GET of one key (42), alternating, then STOP.
    Sif,
    /// N datagrams, the valid PUTs first, then P % invalid.
    Frey,
    /// N datagrams, P % invalid spread evenly among valid PUTs.
    Frigg,
}

impl Behaviour {
    pub const ALL: [Behaviour; 8] = [
        Behaviour::Thor,
        Behaviour::Odin,
        Behaviour::Loki,
        Behaviour::Njord,
        Behaviour::Sylvie,
        Behaviour::Sif,
        Behaviour::Frey,
        Behaviour::Frigg,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Behaviour::Thor => "thor",
            Behaviour::Odin => "odin",
            Behaviour::Loki => "loki",
            Behaviour::Njord => "njord",
            Behaviour::Sylvie => "sylvie",
            Behaviour::Sif => "sif",
            Behaviour::Frey => "frey",
            Behaviour::Frigg => "frigg",
        }
    }

    /// Datagrams sent (STOP excluded) unless `--packets` says otherwise.
    pub fn default_packets(&self) -> u64 {
        match self {
            Behaviour::Sylvie => 10_000_000,
            Behaviour::Frey | Behaviour::Frigg => 1000,
            _ => 12,
        }
    }
}

impl std::str::FromStr for Behaviour {
    type Err = BagError;
    fn from_str(s: &str) -> Result<Self, BagError> {
        let l = s.to_ascii_lowercase();
        Behaviour::ALL
            .into_iter()
            .find(|b| b.name() == l)
            .ok_or_else(|| BagError::Behaviour(s.to_string()))
    }
}

/// What the client sends.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub addr: SocketAddr,
    pub behaviour: Behaviour,
    /// Datagrams (STOP excluded); `None`: the behaviour's default.
    pub packets: Option<u64>,
    /// Frey, Frigg: share of invalid datagrams, 0..=100.
    pub invalid_percent: u32,
    /// Datagrams per second (sent in bursts of 1 ms worth); `None`: as
    /// fast as the socket takes them.
    pub rate: Option<u64>,
    /// Keys of the PUTs: `seq % keys`.
    pub keys: u32,
    /// Send STOP at the end (three times, 5 ms apart: one may be lost).
    pub stop: bool,
    /// Pin the sending thread to this CPU.
    pub cpu: Option<usize>,
    /// Wait this long for GET replies after sending (0: do not wait).
    pub reply_wait: Duration,
}

impl ClientConfig {
    /// A client of `behaviour` toward `addr`, defaults elsewhere.
    pub fn new(addr: SocketAddr, behaviour: Behaviour) -> ClientConfig {
        ClientConfig {
            addr,
            behaviour,
            packets: None,
            invalid_percent: 0,
            rate: None,
            keys: 1000,
            stop: true,
            cpu: None,
            reply_wait: Duration::ZERO,
        }
    }
}

/// What the client sent.
#[derive(Clone, Debug, Default)]
pub struct ClientReport {
    /// Valid requests sent (STOP excluded); PUTs among them.
    pub valid: u64,
    pub puts: u64,
    /// Invalid datagrams sent.
    pub invalid: u64,
    /// Sends that failed (the datagram did not leave).
    pub send_errors: u64,
    /// First to last send.
    pub elapsed: Duration,
    /// CPU time of the sending thread (on loopback this includes the
    /// kernel's receive path, the socket filter among it).
    pub cpu: CpuTime,
    /// GET replies received.
    pub replies: u64,
}

/// One datagram of a behaviour, before sequence numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A PUT; `Some(key)` for a behaviour's own key, `None`: `seq % keys`.
    Put(Option<u32>),
    /// GET / DELETE of the key of the last PUT (or `Some(key)`).
    Get(Option<u32>),
    Delete(Option<u32>),
    Bad,
}

/// Is datagram `i` of `n` invalid when `p` % are spread evenly?
fn spread(i: u64, p: u64) -> bool {
    (i + 1) * p / 100 > i * p / 100
}

/// Datagram `i` (of `n`) of behaviour `b` with `p` % invalid.
pub fn step(b: Behaviour, i: u64, n: u64, p: u32) -> Step {
    let p = u64::from(p.min(100));
    match b {
        Behaviour::Thor | Behaviour::Sylvie => Step::Put(None),
        Behaviour::Odin => {
            if i.is_multiple_of(2) {
                Step::Put(None)
            } else {
                Step::Get(None)
            }
        }
        Behaviour::Loki => match i % 3 {
            0 => Step::Put(None),
            1 => Step::Bad,
            _ => Step::Get(None),
        },
        Behaviour::Njord => match i % 4 {
            0 => Step::Put(None),
            1 => Step::Get(None),
            _ => Step::Delete(None),
        },
        Behaviour::Sif => {
            if i.is_multiple_of(2) {
                Step::Put(Some(42))
            } else {
                Step::Get(Some(42))
            }
        }
        Behaviour::Frey => {
            let bad = (n * p + 50) / 100;
            if i >= n - bad.min(n) {
                Step::Bad
            } else {
                Step::Put(None)
            }
        }
        Behaviour::Frigg => {
            if spread(i, p) {
                Step::Bad
            } else {
                Step::Put(None)
            }
        }
    }
}

/// Sends `cfg`'s datagrams.
pub fn run(cfg: &ClientConfig) -> Result<ClientReport, BagError> {
    if let Some(cpu) = cfg.cpu {
        sys::pin_to_cpu(cpu).map_err(io(format!("pin to CPU {cpu}")))?;
    }
    let local: SocketAddr = if cfg.addr.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let sock = UdpSocket::bind(local).map_err(io("bind client socket"))?;
    sock.connect(cfg.addr)
        .map_err(io(format!("connect {}", cfg.addr)))?;
    let n = cfg.packets.unwrap_or(cfg.behaviour.default_packets());
    let keys = cfg.keys.max(1);
    // Pacing in bursts of 1 ms worth of datagrams, sleeping between
    // them: the thread's CPU time stays the cost of sending (and, on
    // loopback, of the receive path), not of a spin loop.
    let rate = cfg.rate.filter(|r| *r > 0);
    let burst = rate.map_or(u64::MAX, |r| (r / 1000).max(1));
    let mut rep = ClientReport::default();
    let mut seq: u64 = 0;
    let mut last_key: u32 = 0;
    let mut buf = Vec::with_capacity(32);
    let cpu0 = CpuTime::thread();
    let t0 = Instant::now();
    for i in 0..n {
        if let Some(r) = rate {
            if i.is_multiple_of(burst) {
                let due = t0 + Duration::from_secs_f64(i as f64 / r as f64);
                loop {
                    let now = Instant::now();
                    if now >= due {
                        break;
                    }
                    let left = due - now;
                    if left > Duration::from_micros(100) {
                        std::thread::sleep(left - Duration::from_micros(50));
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        buf.clear();
        let valid = match step(cfg.behaviour, i, n, cfg.invalid_percent) {
            Step::Put(k) => {
                let key = k.unwrap_or((seq % u64::from(keys)) as u32);
                last_key = key;
                Command::Put { key, value: seq }.encode_into(&mut buf);
                seq += 1;
                rep.puts += 1;
                true
            }
            Step::Get(k) => {
                Command::Get {
                    key: k.unwrap_or(last_key),
                }
                .encode_into(&mut buf);
                true
            }
            Step::Delete(k) => {
                Command::Delete {
                    key: k.unwrap_or(last_key),
                }
                .encode_into(&mut buf);
                true
            }
            Step::Bad => {
                buf.extend_from_slice(&bad(i));
                false
            }
        };
        match sock.send(&buf) {
            Ok(_) if valid => rep.valid += 1,
            Ok(_) => rep.invalid += 1,
            Err(_) => rep.send_errors += 1,
        }
    }
    rep.elapsed = t0.elapsed();
    rep.cpu = CpuTime::thread().since(&cpu0);
    if !cfg.reply_wait.is_zero() {
        let _ = sock.set_read_timeout(Some(cfg.reply_wait));
        let mut r = [0u8; 64];
        while sock.recv(&mut r).is_ok() {
            rep.replies += 1;
        }
    }
    if cfg.stop {
        for _ in 0..3 {
            // The server closes its socket at the first STOP: a later
            // one may be refused, which is fine.
            let _ = sock.send(&Command::Stop.encode());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviours_by_name_case_insensitive() {
        for b in Behaviour::ALL {
            assert_eq!(b.name().to_uppercase().parse::<Behaviour>().ok(), Some(b));
        }
        assert!("Heimdall".parse::<Behaviour>().is_err());
    }

    #[test]
    fn frey_and_frigg_send_the_share_asked() {
        for p in [0, 1, 25, 50, 75, 99, 100] {
            for b in [Behaviour::Frey, Behaviour::Frigg] {
                let n = 1000;
                let bad = (0..n).filter(|&i| step(b, i, n, p) == Step::Bad).count();
                assert_eq!(bad as u32, p * 10, "{b:?} {p}%");
            }
        }
        // Frey: valid first.
        assert_eq!(step(Behaviour::Frey, 0, 100, 50), Step::Put(None));
        assert_eq!(step(Behaviour::Frey, 99, 100, 50), Step::Bad);
        // Frigg: spread (no run of more than one invalid at 50 %).
        let v: Vec<bool> = (0..100)
            .map(|i| step(Behaviour::Frigg, i, 100, 50) == Step::Bad)
            .collect();
        assert!(v.windows(2).all(|w| !(w[0] && w[1])));
    }
}
