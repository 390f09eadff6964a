//! StatsService: per-chain, per-verdict counters of every deployment,
//! streamed every interval.

use super::{blocking, Daemon};
use crate::auth::rpc;
use crate::proto::stats_service_server::StatsService;
use crate::proto::{self, StatsSnapshot};
use crate::validate;
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The service.
pub struct Stats(pub Arc<Daemon>);

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<StatsSnapshot, Status>> + Send>>;

/// Snapshot `seq` of the deployments on `dev` (all when `None`), read
/// at `not_before` or later (shared with the other streams, see
/// [`crate::stats_hub`]), with the `top` largest entries of each map.
pub async fn snapshot(
    d: &Daemon,
    seq: u64,
    dev: Option<&str>,
    not_before: std::time::Instant,
    top: usize,
) -> Result<StatsSnapshot, Status> {
    let s = d
        .stats
        .get(&d.cfg.paths, &d.cfg.switch_dir, not_before)
        .await?;
    let mut deployments: Vec<proto::DeploymentStats> = s
        .deployments
        .iter()
        .filter(|x| dev.is_none_or(|v| v == x.dev))
        .cloned()
        .collect();
    if top > 0 {
        let paths = d.cfg.paths.clone();
        deployments = blocking(move || {
            crate::stats_hub::add_map_tops(&paths, &mut deployments, top);
            deployments
        })
        .await?;
    }
    Ok(StatsSnapshot {
        seq,
        unix_ms: s.unix_ms,
        deployments,
    })
}

/// Most map entries a stream's snapshots carry per map.
const MAX_TOP: u32 = 100;

#[tonic::async_trait]
impl StatsService for Stats {
    type WatchStatsStream = SnapshotStream;

    async fn watch_stats(
        &self,
        req: Request<proto::WatchStatsRequest>,
    ) -> Result<Response<SnapshotStream>, Status> {
        let call = self.0.begin(&req, rpc::WATCH_STATS)?;
        let r = req.into_inner();
        let checked = (|| {
            let dev = validate::dev(&r.dev, true)?;
            let every = validate::interval_ms(r.interval_ms)?;
            if r.top_entries > MAX_TOP {
                return Err(Status::invalid_argument(format!(
                    "top_entries: {} is more than {MAX_TOP}",
                    r.top_entries
                )));
            }
            Ok((dev, every))
        })();
        let (dev, every) = match checked {
            Ok(x) => x,
            Err(e) => return call.done("", "", Err(e)),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let d = self.0.clone();
        let count = u64::from(r.count);
        let top = r.top_entries as usize;
        tokio::spawn(async move {
            // The first snapshot now, then on multiples of the interval,
            // when the other streams of this interval read too.
            let period = std::time::Duration::from_millis(every.into());
            let start = crate::stats_hub::next_aligned(period);
            let mut tick = tokio::time::interval_at(start.into(), period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut seq = 0u64;
            let mut when = std::time::Instant::now();
            while count == 0 || seq < count {
                if seq > 0 {
                    when = tick.tick().await.into_std();
                }
                let s = snapshot(&d, seq, dev.as_deref(), when, top).await;
                let stop = s.is_err();
                if tx.send(s).await.is_err() || stop {
                    break;
                }
                seq += 1;
            }
        });
        let out: SnapshotStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx));
        call.done("", "", Ok(out))
    }
}
