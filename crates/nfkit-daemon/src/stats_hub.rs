//! Counter snapshots shared by every stats stream: the streams of one
//! interval tick together (on multiples of the interval, in Unix time),
//! and the first to ask at a tick reads the counters of every deployment
//! while the others wait for that read and take it. 100 streams cost one
//! read of the maps per tick, not 100.

use crate::convert::{faults, stats_counters};
use crate::proto;
use crate::validate::attach_wire;
use nfkit_control::maps::{self, DumpOptions, KernelMap};
use nfkit_kernel::deploy::{self as kdeploy, Paths};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// One read of every deployment's counters.
pub struct Snapshot {
    /// When the read started.
    pub at: Instant,
    pub unix_ms: u64,
    pub deployments: Vec<proto::DeploymentStats>,
}

/// The last read, and how many reads were made.
#[derive(Default)]
pub struct StatsHub {
    last: tokio::sync::Mutex<Option<Arc<Snapshot>>>,
    reads: prometheus_client::metrics::counter::Counter,
}

impl StatsHub {
    /// A hub counting its reads in `reads` (`nfkitd_stats_reads`).
    pub fn new(reads: prometheus_client::metrics::counter::Counter) -> StatsHub {
        StatsHub {
            last: Default::default(),
            reads,
        }
    }

    /// A snapshot read at `not_before` or later: the last one when it
    /// is recent enough, else a new read (one at a time) of the
    /// deployments of `paths` and the switches answering in `switch_dir`.
    pub async fn get(
        &self,
        paths: &Paths,
        switch_dir: &std::path::Path,
        not_before: Instant,
    ) -> Result<Arc<Snapshot>, Status> {
        let mut g = self.last.lock().await;
        if let Some(s) = g.as_ref().filter(|s| s.at >= not_before) {
            return Ok(s.clone());
        }
        let paths = paths.clone();
        let at = Instant::now();
        let unix_ms = crate::audit::now_ms();
        let dir = switch_dir.to_path_buf();
        let (st, sw) = super::service::blocking(move || {
            let sw: Vec<proto::DeploymentStats> = crate::switches::names(&dir)
                .into_iter()
                .filter_map(|n| {
                    let st = crate::switches::status(&dir, &n).ok()?;
                    let chains = crate::switches::counters(&st);
                    Some(proto::DeploymentStats {
                        source: st["script"].as_str().unwrap_or_default().to_string(),
                        faults: chains.iter().map(|c| c.faults).sum(),
                        chains,
                        switch_name: n,
                        ..Default::default()
                    })
                })
                .collect();
            (nfkit_control::status::status(&paths), sw)
        })
        .await?;
        let st = st.map_err(crate::convert::control_error)?;
        self.reads.inc();
        let s = Arc::new(Snapshot {
            at,
            unix_ms,
            deployments: st
                .iter()
                .map(|s| {
                    let dd = &s.status.deployment;
                    proto::DeploymentStats {
                        dev: dd.dev.clone(),
                        attach: attach_wire(dd.hook),
                        source: dd.source.clone(),
                        chains: stats_counters(&s.verdicts),
                        faults: s.verdicts.iter().map(faults).sum(),
                        maps: Vec::new(),
                        switch_name: String::new(),
                    }
                })
                .chain(sw)
                .collect(),
        });
        *g = Some(s.clone());
        Ok(s)
    }

    /// Reads of the counters so far (`nfkitd_stats_reads`).
    pub fn reads(&self) -> u64 {
        self.reads.get()
    }
}

/// The next multiple of `every` in Unix time at least half an interval
/// away, as an [`Instant`] (the tick after a stream's first snapshot).
pub fn next_aligned(every: Duration) -> Instant {
    let ms = every.as_millis().max(1) as u64;
    let now = crate::audit::now_ms();
    let mut wait = ms - now % ms;
    if wait < ms / 2 {
        wait += ms;
    }
    Instant::now() + Duration::from_millis(wait)
}

/// The largest `n` entries of each data map of `d` (not nfkit's own
/// maps), by value when values are integers; maps without entries too.
pub fn map_tops(d: &kdeploy::Deployment, n: usize) -> Vec<proto::MapTop> {
    d.maps
        .iter()
        .filter(|m| !m.name.starts_with("nfkit_") && !m.name.starts_with('.'))
        .filter_map(|rec| {
            let k = kdeploy::open_pinned_map(&rec.name, &rec.pin).ok()?;
            if !maps::has_data_entries(k.map_type()) {
                return None;
            }
            let m = KernelMap::from_record(rec, k);
            let opts = DumpOptions {
                skip_zero_array: true,
                sum_per_cpu: true,
            };
            let rows = maps::dump(&m, opts).ok()?;
            Some(top(
                &rec.name,
                rows.into_iter()
                    .map(|r| (r.key_text, r.value_text))
                    .collect(),
                n,
            ))
        })
        .collect()
}

/// The `n` rows with the largest values (values that are not integers
/// keep the key order).
pub fn top(name: &str, mut rows: Vec<(String, String)>, n: usize) -> proto::MapTop {
    let total = rows.len() as u64;
    rows.sort_by_key(|(_, v)| std::cmp::Reverse(v.parse::<u128>().unwrap_or(0)));
    rows.truncate(n);
    proto::MapTop {
        name: name.to_string(),
        total,
        entries: rows
            .into_iter()
            .map(|(key_text, value_text)| proto::TopEntry {
                key_text,
                value_text,
            })
            .collect(),
    }
}

/// `map_tops` of the deployments in `deps` (read from `paths`).
pub fn add_map_tops(paths: &Paths, deps: &mut [proto::DeploymentStats], n: usize) {
    let Ok(all) = kdeploy::status(paths) else {
        return;
    };
    for d in deps.iter_mut() {
        if let Some(s) = all
            .iter()
            .find(|s| s.deployment.dev == d.dev && attach_wire(s.deployment.hook) == d.attach)
        {
            d.maps = map_tops(&s.deployment, n);
        }
    }
}
