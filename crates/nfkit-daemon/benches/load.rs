//! `make bench` part: nfkitd under load. A deployment on a namespace
//! testbed; 1000 concurrent clients, each on its own connection to the
//! Unix socket, for 30 s (`NFKIT_LOAD_SECS`): 900 read a map entry in a
//! loop, 100 hold a statistics stream (one snapshot every 100 ms).
//! Reports throughput, read latency percentiles, stream gaps and errors
//! (any error fails the bench), and, in the same run, the same map read
//! done directly in-process, as the ratio daemon / direct. Writes
//! `target/nfkit-bench/daemon-load.md`. Needs root (skipped otherwise).

#[path = "../tests/common/mod.rs"]
mod common;

use common::{is_root, my_ids, script, Bed, Daemon, Scratch};
use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
use nfkit_daemon::proto::map_service_client::MapServiceClient;
use nfkit_daemon::proto::stats_service_client::StatsServiceClient;
use nfkit_daemon::proto::{self, script_source::Kind, AttachPoint};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const READERS: usize = 900;
const STREAMS: usize = 100;

fn get_req() -> proto::GetEntryRequest {
    proto::GetEntryRequest {
        map: Some(proto::MapRef {
            name: "seen".into(),
            ..Default::default()
        }),
        key: "0".into(),
    }
}

/// Percentile `p` (0..1) of sorted `v`.
fn pct(v: &[u32], p: f64) -> u32 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    if !is_root() {
        println!("daemon load bench: skipped (needs root)");
        return;
    }
    let secs: u64 = std::env::var("NFKIT_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let s = Scratch::new("dmn-load");
    let bed = Bed::new('l', 64);
    let (uid, _) = my_ids();
    let d = Daemon::start(&s, &format!("admin = {{ uids = [{uid}] }}"), "");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let socket = d.socket.clone();
    rt.block_on(async {
        let ch = nfkit_daemon::client::channel(&socket)
            .await
            .expect("connect");
        DeploymentServiceClient::new(ch)
            .deploy(proto::DeployRequest {
                script: Some(proto::ScriptSource {
                    kind: Some(Kind::Inline(proto::InlineScript {
                        file: "count_v1.py".into(),
                        source: script("count_v1.py"),
                        source_path: String::new(),
                    })),
                }),
                dev: bed.dev.clone(),
                netns: bed.sut.clone(),
                attach: AttachPoint::XdpGeneric as i32,
                mode: 0,
            })
            .await
            .expect("deploy");
    });
    bed.send_udp(5);

    // Direct, in-process: the same lookup the daemon does per request.
    let paths = nfkit_kernel::deploy::Paths {
        pin_root: s.bpf(),
        state_file: s.state().join("state.json"),
    };
    let mut direct = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        let t = Instant::now();
        let m = nfkit_control::maps::KernelMap::find(&paths, "seen", None, None).expect("map");
        let r = nfkit_control::maps::access::get(&m, "0").expect("get");
        std::hint::black_box(r);
        direct.push(t.elapsed().as_micros() as u32);
    }
    direct.sort_unstable();

    // Through the daemon, under load.
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(String::new()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (lat, gaps, snaps, conn_ms) = rt.block_on(async {
        let t_conn = Instant::now();
        let mut chans = Vec::new();
        for _ in 0..READERS + STREAMS {
            chans.push(
                nfkit_daemon::client::channel(&socket)
                    .await
                    .expect("connect"),
            );
        }
        let conn_ms = t_conn.elapsed().as_secs_f64() * 1e3;
        let mut readers = Vec::new();
        let mut streams = Vec::new();
        for (i, ch) in chans.into_iter().enumerate() {
            let (errors, first) = (errors.clone(), first_error.clone());
            let fail = move |e: tonic::Status| {
                errors.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut f) = first.lock() {
                    if f.is_empty() {
                        *f = format!("{:?}: {}", e.code(), e.message());
                    }
                }
            };
            if i < READERS {
                readers.push(tokio::spawn(async move {
                    let mut c = MapServiceClient::new(ch);
                    let mut lat = Vec::new();
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        match c.get_entry(get_req()).await {
                            Ok(_) => lat.push(t.elapsed().as_micros() as u32),
                            Err(e) => fail(e),
                        }
                    }
                    lat
                }));
            } else {
                streams.push(tokio::spawn(async move {
                    let mut c = StatsServiceClient::new(ch);
                    let mut gaps = Vec::new();
                    let mut n = 0u64;
                    let mut st = match c
                        .watch_stats(proto::WatchStatsRequest {
                            interval_ms: 100,
                            count: 0,
                            dev: String::new(),
                        })
                        .await
                    {
                        Ok(r) => r.into_inner(),
                        Err(e) => {
                            fail(e);
                            return (gaps, n);
                        }
                    };
                    let mut last = Instant::now();
                    while Instant::now() < deadline {
                        match tokio::time::timeout(Duration::from_secs(5), st.message()).await {
                            Ok(Ok(Some(_))) => {
                                n += 1;
                                gaps.push(last.elapsed().as_millis() as u32);
                                last = Instant::now();
                            }
                            Ok(Ok(None)) => break,
                            Ok(Err(e)) => {
                                fail(e);
                                break;
                            }
                            Err(_) => {
                                fail(tonic::Status::deadline_exceeded("no snapshot for 5 s"));
                                break;
                            }
                        }
                    }
                    (gaps, n)
                }));
            }
        }
        let mut lat = Vec::new();
        for r in readers {
            lat.extend(r.await.expect("reader"));
        }
        let (mut gaps, mut snaps) = (Vec::new(), 0u64);
        for s in streams {
            let (g, n) = s.await.expect("stream");
            gaps.extend(g.into_iter().skip(1));
            snaps += n;
        }
        (lat, gaps, snaps, conn_ms)
    });
    let mut lat = lat;
    lat.sort_unstable();
    let mut gaps = gaps;
    gaps.sort_unstable();
    let errs = errors.load(Ordering::Relaxed);
    let p99 = pct(&lat, 0.99);
    let d99 = pct(&direct, 0.99).max(1);
    let report = format!(
        "# nfkitd under load ({} clients on the Unix socket, {secs} s)\n\n\
         | | value |\n|---|---|\n\
         | connections opened | {} in {conn_ms:.0} ms |\n\
         | map reads (GetEntry), {READERS} clients | {} ({:.0}/s) |\n\
         | read latency p50 / p99 / p99.9 / max | {} / {} / {} / {} µs |\n\
         | same read in-process, p50 / p99 | {} / {} µs |\n\
         | p99 ratio daemon under load / direct | {:.1} |\n\
         | stats streams, {STREAMS} clients at 100 ms | {snaps} snapshots, gap p50 / p99 / max {} / {} / {} ms |\n\
         | errors | {errs} |\n",
        READERS + STREAMS,
        READERS + STREAMS,
        lat.len(),
        lat.len() as f64 / secs as f64,
        pct(&lat, 0.5),
        p99,
        pct(&lat, 0.999),
        lat.last().copied().unwrap_or(0),
        pct(&direct, 0.5),
        pct(&direct, 0.99),
        p99 as f64 / d99 as f64,
        pct(&gaps, 0.5),
        pct(&gaps, 0.99),
        gaps.last().copied().unwrap_or(0),
    );
    print!("{report}");
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("nfkit-bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("daemon-load.md"), &report);
    drop(d);
    if errs > 0 {
        eprintln!(
            "daemon load bench: {errs} errors, first: {}",
            first_error.lock().map(|f| f.clone()).unwrap_or_default()
        );
        std::process::exit(1);
    }
}
