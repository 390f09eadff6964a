//! StatsService: per-chain, per-verdict counters of every deployment,
//! streamed every interval.

use super::{blocking, Daemon};
use crate::auth::rpc;
use crate::convert::{control_error, stats_counters};
use crate::proto::stats_service_server::StatsService;
use crate::proto::{self, StatsSnapshot};
use crate::validate::{self, attach_wire};
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The service.
pub struct Stats(pub Arc<Daemon>);

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<StatsSnapshot, Status>> + Send>>;

/// One snapshot of the deployments on `dev` (all when `None`).
pub async fn snapshot(d: &Daemon, seq: u64, dev: Option<&str>) -> Result<StatsSnapshot, Status> {
    let paths = d.cfg.paths.clone();
    let st = blocking(move || nfkit_control::status::status(&paths))
        .await?
        .map_err(control_error)?;
    Ok(StatsSnapshot {
        seq,
        unix_ms: crate::audit::now_ms(),
        deployments: st
            .iter()
            .filter(|s| dev.is_none_or(|x| x == s.status.deployment.dev))
            .map(|s| {
                let dd = &s.status.deployment;
                proto::DeploymentStats {
                    dev: dd.dev.clone(),
                    attach: attach_wire(dd.hook),
                    source: dd.source.clone(),
                    chains: stats_counters(&s.verdicts),
                }
            })
            .collect(),
    })
}

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
            Ok((dev, every))
        })();
        let (dev, every) = match checked {
            Ok(x) => x,
            Err(e) => return call.done("", "", Err(e)),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let d = self.0.clone();
        let count = u64::from(r.count);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(every.into()));
            let mut seq = 0u64;
            while count == 0 || seq < count {
                tick.tick().await;
                let s = snapshot(&d, seq, dev.as_deref()).await;
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
