//! Counters: each worker keeps its own ([`WorkerCounters`], written by
//! that worker only, read by anyone: relaxed loads and stores, no
//! read-modify-write contention), and [`Stats`] is their sum at one
//! moment, with the per-chain counters of `nfkit_stats`.

use nfkit_abi::verdict::Action;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter one thread writes and any thread reads.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` (the owning worker only: a load and a store, not an
    /// atomic add).
    #[inline]
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One worker's counters of one port.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received (all of them, bad ones included).
    pub rx: Counter,
    /// Frames the port took for transmission.
    pub tx: Counter,
    /// Frames for this port it did not take (full, no output, error).
    pub tx_dropped: Counter,
    /// Frames shorter than an Ethernet header, dropped before the chain.
    pub runt: Counter,
    /// Frames longer than the frame room, dropped before the chain.
    pub oversize: Counter,
}

/// Why the switch dropped a frame the chain did not drop.
#[derive(Debug, Default)]
pub struct DropCounters {
    /// PASS or HOST with no host port.
    pub no_host_port: Counter,
    /// REDIRECT to a port number that does not exist.
    pub no_such_port: Counter,
    /// CONTROLLER with the controller channel full.
    pub controller_full: Counter,
}

/// Everything one worker counts.
#[derive(Debug)]
pub struct WorkerCounters {
    /// Per port, in port order.
    pub ports: Vec<PortCounters>,
    /// Resolved verdicts per action (index = action code).
    pub actions: [Counter; 8],
    /// Runs that failed in the VM or gave no verdict (the fault action
    /// applied).
    pub faults: Counter,
    pub drops: DropCounters,
    /// Frames this worker handed to another (flow-hash dispatch).
    pub handed_off: Counter,
    /// Receive-to-transmit time of the frames it sent (live ports).
    pub latency: crate::latency::Histogram,
}

impl WorkerCounters {
    pub fn new(ports: usize) -> WorkerCounters {
        WorkerCounters {
            ports: (0..ports).map(|_| PortCounters::default()).collect(),
            actions: Default::default(),
            faults: Counter::default(),
            drops: DropCounters::default(),
            handed_off: Counter::default(),
            latency: Default::default(),
        }
    }
}

/// One port's counters, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PortTotals {
    /// Port number (from 1, in `--port` order).
    pub port: u32,
    pub name: String,
    /// `NAME:KIND...` as given.
    pub spec: String,
    pub rx: u64,
    pub tx: u64,
    pub tx_dropped: u64,
    pub runt: u64,
    pub oversize: u64,
}

/// One chain's `nfkit_stats` row (docs/abi.md 8), columns by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainTotals {
    pub chain: String,
    /// `(column name, count)` for the non-zero columns (`PASS`, `VALUE`,
    /// `FAULT`, ...).
    pub counts: Vec<(String, u64)>,
}

/// The switch's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub ports: Vec<PortTotals>,
    /// Resolved verdicts per action (all eight, by name).
    pub actions: Vec<(String, u64)>,
    /// Per chain, as the classifier counts them in `nfkit_stats`.
    pub chains: Vec<ChainTotals>,
    /// Runs that failed in the VM or returned no verdict.
    pub faults: u64,
    pub no_host_port: u64,
    pub no_such_port: u64,
    pub controller_full: u64,
    pub handed_off: u64,
    /// The running version of the chain (1: the first; +1 per reload).
    pub version: u64,
    /// Reloads done, and refused (the script did not load).
    pub reloads: u64,
    pub reload_failures: u64,
    /// Frames each version of the ingress program ran, in order.
    pub versions: Vec<crate::reload::VersionTotals>,
    /// Frames each post program ran, in order (the script's own as
    /// `post`, updated ones as `post:PORT`).
    pub post_versions: Vec<crate::reload::VersionTotals>,
    /// Authenticated updates applied and refused.
    pub updates: crate::update::UpdateTotals,
}

impl Stats {
    /// Sums `workers`' counters (ports named by `ports`: (name, spec)).
    pub fn sum(workers: &[WorkerCounters], ports: &[(String, String)]) -> Stats {
        let mut s = Stats {
            ports: ports
                .iter()
                .enumerate()
                .map(|(i, (name, spec))| PortTotals {
                    port: i as u32 + 1,
                    name: name.clone(),
                    spec: spec.clone(),
                    ..PortTotals::default()
                })
                .collect(),
            actions: Action::ALL
                .iter()
                .map(|a| (a.name().to_string(), 0))
                .collect(),
            ..Stats::default()
        };
        for w in workers {
            for (t, c) in s.ports.iter_mut().zip(&w.ports) {
                t.rx += c.rx.get();
                t.tx += c.tx.get();
                t.tx_dropped += c.tx_dropped.get();
                t.runt += c.runt.get();
                t.oversize += c.oversize.get();
            }
            for (t, c) in s.actions.iter_mut().zip(&w.actions) {
                t.1 += c.get();
            }
            s.faults += w.faults.get();
            s.no_host_port += w.drops.no_host_port.get();
            s.no_such_port += w.drops.no_such_port.get();
            s.controller_full += w.drops.controller_full.get();
            s.handed_off += w.handed_off.get();
        }
        s
    }

    /// The count of action `a`.
    pub fn action(&self, a: Action) -> u64 {
        self.actions
            .iter()
            .find(|(n, _)| n == a.name())
            .map_or(0, |(_, c)| *c)
    }

    /// Frames received on all ports.
    pub fn rx_total(&self) -> u64 {
        self.ports.iter().map(|p| p.rx).sum()
    }

    /// The final report as text.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "ports:");
        for p in &self.ports {
            let _ = writeln!(
                s,
                "  {} {} ({}): rx {}, tx {}, tx_dropped {}, runt {}, oversize {}",
                p.port, p.name, p.spec, p.rx, p.tx, p.tx_dropped, p.runt, p.oversize
            );
        }
        let acts: Vec<String> = self
            .actions
            .iter()
            .filter(|(_, c)| *c > 0)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        let _ = writeln!(
            s,
            "verdicts: {}",
            if acts.is_empty() {
                "none".to_string()
            } else {
                acts.join(", ")
            }
        );
        let _ = writeln!(s, "chains:");
        for c in &self.chains {
            let parts: Vec<String> = c.counts.iter().map(|(n, v)| format!("{n} {v}")).collect();
            let _ = writeln!(s, "  {}: {}", c.chain, parts.join(", "));
        }
        let _ = writeln!(
            s,
            "faults: {}; dropped: no host port {}, no such port {}, controller full {}",
            self.faults, self.no_host_port, self.no_such_port, self.controller_full
        );
        if self.updates.enabled {
            let reasons: Vec<String> = self
                .updates
                .reasons
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let _ = writeln!(
                s,
                "updates: {} applied, {} refused{}",
                self.updates.applied,
                self.updates.refused,
                if reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", reasons.join(", "))
                }
            );
        }
        if self.reloads + self.reload_failures > 0 {
            let _ = writeln!(
                s,
                "version {}: {} reloads, {} refused",
                self.version, self.reloads, self.reload_failures
            );
        }
        s
    }

    /// The report as JSON.
    pub fn json(&self) -> serde_json::Value {
        let obj = |v: &[(String, u64)]| -> serde_json::Value {
            v.iter()
                .map(|(n, c)| (n.clone(), serde_json::Value::from(*c)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        serde_json::json!({
            "ports": self.ports,
            "verdicts": obj(&self.actions),
            "chains": self.chains.iter().map(|c| serde_json::json!({
                "chain": c.chain,
                "counts": obj(&c.counts),
            })).collect::<Vec<_>>(),
            "faults": self.faults,
            "dropped": {
                "no_host_port": self.no_host_port,
                "no_such_port": self.no_such_port,
                "controller_full": self.controller_full,
            },
            "handed_off": self.handed_off,
            "version": self.version,
            "reloads": self.reloads,
            "reload_failures": self.reload_failures,
            "versions": self.versions,
            "post_versions": self.post_versions,
            "updates": self.updates,
        })
    }
}
