//! The Prometheus exposition (`--metrics ADDR`, config `metrics`):
//! counters the daemon keeps (requests by RPC and code, deploy and swap
//! latency histograms, for kernel hooks and for switches) and, read at
//! each scrape, the per-chain per-verdict packet counters and map
//! occupancy of every deployment, and the per-chain per-verdict counters
//! of every switch (asked on its control socket).
//! Served as Prometheus text at `GET /metrics` over plain HTTP/1.

use crate::error::DaemonError;
use http_body_util::Full;
use hyper::body::Bytes;
use nfkit_kernel::deploy::{self as kdeploy, Paths};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    rpc: String,
    code: String,
}

/// What the daemon counts as it serves.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    deploy: Histogram,
    swap: Histogram,
    switch_deploy: Histogram,
    switch_swap: Histogram,
    /// Reads of every deployment's counters for the stats streams.
    pub stats_reads: Counter,
}

impl Metrics {
    /// The metrics, with the deployments of `paths` and the switches
    /// answering in `switch_dir` read at each scrape.
    pub fn new(paths: Paths, switch_dir: std::path::PathBuf) -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "nfkitd_requests",
            "gRPC requests served, by RPC and status code",
            requests.clone(),
        );
        let deploy = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "nfkitd_deploy_seconds",
            "Deploys: compile, load and attach or swap, in seconds",
            deploy.clone(),
        );
        let swap = Histogram::new(exponential_buckets(0.000_01, 2.0, 14));
        registry.register(
            "nfkitd_swap_seconds",
            "Live swaps: the link update alone, in seconds",
            swap.clone(),
        );
        let switch_deploy = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "nfkitd_switch_deploy_seconds",
            "Switch deploys: the start until the control socket answers, or a reload's compile and load, in seconds",
            switch_deploy.clone(),
        );
        let switch_swap = Histogram::new(exponential_buckets(0.000_001, 2.0, 16));
        registry.register(
            "nfkitd_switch_swap_seconds",
            "Switch redeploys: publishing the new version until every worker runs it, in seconds",
            switch_swap.clone(),
        );
        let stats_reads = Counter::default();
        registry.register(
            "nfkitd_stats_reads",
            "Reads of the counters of every deployment for the stats streams (one per tick, shared by the streams)",
            stats_reads.clone(),
        );
        registry.register_collector(Box::new(Deployments { paths }));
        registry.register_collector(Box::new(SwitchCounters { dir: switch_dir }));
        Metrics {
            registry,
            requests,
            deploy,
            swap,
            switch_deploy,
            switch_swap,
            stats_reads,
        }
    }

    /// Counts one request.
    pub fn request(&self, rpc: &str, code: &str) {
        self.requests
            .get_or_create(&RequestLabels {
                rpc: rpc.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    /// Records a deploy's times.
    pub fn deployed(&self, o: &kdeploy::DeployOutcome) {
        self.deploy.observe(o.load_time.as_secs_f64());
        if o.swapped {
            self.swap.observe(o.switch_time.as_secs_f64());
        }
    }

    /// Records a switch deploy (start or reload load) and, for a
    /// reload, its swap.
    pub fn switch_deployed(&self, deploy: std::time::Duration, swap: Option<std::time::Duration>) {
        self.switch_deploy.observe(deploy.as_secs_f64());
        if let Some(s) = swap {
            self.switch_swap.observe(s.as_secs_f64());
        }
    }

    /// The exposition text (reads the deployments: call off the runtime).
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// Reads every deployment's counters and maps at each scrape.
#[derive(Debug)]
struct Deployments {
    paths: Paths,
}

impl Collector for Deployments {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(st) = nfkit_control::status::status(&self.paths) else {
            return Ok(());
        };
        {
            let mut m = enc.encode_descriptor(
                "nfkit_chain_packets",
                "Packets by deployment, chain and verdict (the nfkit_stats map)",
                None,
                MetricType::Counter,
            )?;
            for s in &st {
                let d = &s.status.deployment;
                for c in &s.verdicts {
                    for (verdict, n) in &c.counts {
                        let labels = vec![
                            ("dev", d.dev.clone()),
                            ("attach", d.hook.name().to_string()),
                            ("chain", c.chain.clone()),
                            ("verdict", verdict.clone()),
                        ];
                        ConstCounter::new(*n).encode(m.encode_family(&labels)?)?;
                    }
                }
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "nfkit_chain_faults",
                "Packets that ended in a fault (a malformed verdict, an access out of bounds, a loop cap), by deployment and chain",
                None,
                MetricType::Counter,
            )?;
            for s in &st {
                let d = &s.status.deployment;
                for c in &s.verdicts {
                    let labels = vec![
                        ("dev", d.dev.clone()),
                        ("attach", d.hook.name().to_string()),
                        ("chain", c.chain.clone()),
                    ];
                    ConstCounter::new(crate::convert::faults(c))
                        .encode(m.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "nfkit_map_entries",
                "Entries in each deployed map (arrays: entries not all zero)",
                None,
                MetricType::Gauge,
            )?;
            for s in &st {
                let d = &s.status.deployment;
                for rec in &d.maps {
                    let Some(n) = occupancy(rec) else { continue };
                    let labels = vec![
                        ("dev", d.dev.clone()),
                        ("attach", d.hook.name().to_string()),
                        ("map", rec.name.clone()),
                    ];
                    ConstGauge::new(n as i64).encode(m.encode_family(&labels)?)?;
                }
            }
        }
        let mut m = enc.encode_descriptor(
            "nfkit_deployment_attached",
            "1 when the deployment's link is attached and runs a program",
            None,
            MetricType::Gauge,
        )?;
        for s in &st {
            let d = &s.status.deployment;
            let labels = vec![
                ("dev", d.dev.clone()),
                ("attach", d.hook.name().to_string()),
                ("source", d.source.clone()),
            ];
            ConstGauge::new(i64::from(s.status.attached)).encode(m.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Reads every switch's counters on its control socket at each scrape.
#[derive(Debug)]
struct SwitchCounters {
    dir: std::path::PathBuf,
}

impl Collector for SwitchCounters {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let all: Vec<(String, serde_json::Value)> = crate::switches::names(&self.dir)
            .into_iter()
            .filter_map(|n| {
                let st = crate::switches::status(&self.dir, &n).ok()?;
                Some((n, st))
            })
            .collect();
        {
            let mut m = enc.encode_descriptor(
                "nfkit_switch_chain_packets",
                "Frames by software switch, chain and verdict",
                None,
                MetricType::Counter,
            )?;
            for (name, st) in &all {
                for c in crate::switches::counters(st) {
                    let mut counts: Vec<_> = c.counts.iter().collect();
                    counts.sort();
                    for (verdict, n) in counts {
                        let labels = vec![
                            ("switch", name.clone()),
                            ("chain", c.chain.clone()),
                            ("verdict", verdict.clone()),
                        ];
                        ConstCounter::new(*n).encode(m.encode_family(&labels)?)?;
                    }
                }
            }
        }
        let mut m = enc.encode_descriptor(
            "nfkit_switch_version",
            "The version of its chain each running switch runs (1, then +1 per reload)",
            None,
            MetricType::Gauge,
        )?;
        for (name, st) in &all {
            let labels = vec![("switch", name.clone())];
            ConstGauge::new(st["version"].as_i64().unwrap_or(0))
                .encode(m.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Entries of a map of data (arrays: those not all zero); `None` for
/// program and device maps.
fn occupancy(rec: &kdeploy::MapRecord) -> Option<usize> {
    let k = kdeploy::open_pinned_map(&rec.name, &rec.pin).ok()?;
    if !nfkit_control::maps::has_data_entries(k.map_type()) {
        return None;
    }
    let m = nfkit_control::maps::KernelMap::from_record(rec, k);
    let rows = nfkit_control::maps::dump(
        &m,
        nfkit_control::maps::DumpOptions {
            skip_zero_array: true,
            sum_per_cpu: true,
        },
    )
    .ok()?;
    Some(rows.len())
}

/// Serves `GET /metrics` on `addr` until the process ends.
pub async fn serve(addr: std::net::SocketAddr, metrics: Arc<Metrics>) -> Result<(), DaemonError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| DaemonError::Serve(format!("metrics on {addr}: {e}")))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let m = metrics.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| answer(req, m.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(())
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    m: Arc<Metrics>,
) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
    let resp = |code: u16, ctype: &str, body: String| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or_default();
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    if req.method() != hyper::Method::GET || req.uri().path() != "/metrics" {
        return Ok(resp(404, "text/plain", "nfkitd: GET /metrics\n".into()));
    }
    let text = tokio::task::spawn_blocking(move || m.render()).await;
    Ok(match text {
        Ok(Ok(t)) => resp(200, "text/plain; version=0.0.4; charset=utf-8", t),
        _ => resp(
            500,
            "text/plain",
            "nfkitd: encoding the metrics failed\n".into(),
        ),
    })
}
