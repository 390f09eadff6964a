//! `make bench` part: nfkitd under load. A deployment on a namespace
//! testbed; 1000 concurrent clients, each on its own connection to the
//! Unix socket, for 30 s (`NFKIT_LOAD_SECS`): 900 read a map entry, 100
//! hold a statistics stream (one snapshot every 100 ms). Two phases:
//!
//! * **paced** (`NFKIT_LOAD_SECS`): each reader sends one read every
//!   `PACE_MS` (4500 reads/s offered, below what the daemon serves on
//!   2 cores), latency timed from when the read was due, so a client
//!   that falls behind counts its delay (no coordinated omission); the
//!   100 streams run meanwhile.
//! * **saturated** (a third as long): each reader reads in a loop, one
//!   read in flight per connection; latency is then mostly the queue of
//!   900 reads in flight (Little's law: in flight / throughput).
//!
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
/// Paced phase: one read per reader every PACE_MS.
const PACE_MS: u64 = 200;

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
                post_devs: Vec::new(),
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
    // The map opened once, as the daemon's cache keeps it.
    let m = nfkit_control::maps::KernelMap::find(&paths, "seen", None, None).expect("map");
    let mut opened = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        let t = Instant::now();
        let r = nfkit_control::maps::access::get(&m, "0").expect("get");
        std::hint::black_box(r);
        opened.push(t.elapsed().as_nanos() as u32);
    }
    opened.sort_unstable();

    // Through the daemon, under load: paced with the streams, then saturated.
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(String::new()));
    let (lat, gaps, snaps, conn_ms) = load(&rt, &socket, secs, true, &errors, &first_error);
    let (sat, _, _, _) = load(
        &rt,
        &socket,
        (secs / 3).max(1),
        false,
        &errors,
        &first_error,
    );
    let mut sat = sat;
    sat.sort_unstable();
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
         | paced map reads (GetEntry), {READERS} clients, one per {PACE_MS} ms each | {} ({:.0}/s) |\n\
         | paced read latency from due time, p50 / p99 / p99.9 / max | {} / {} / {} / {} µs |\n\
         | stats streams meanwhile, {STREAMS} clients at 100 ms | {snaps} snapshots, gap p50 / p99 / max {} / {} / {} ms |\n\
         | saturated map reads, {READERS} clients in a loop, {} s | {} ({:.0}/s) |\n\
         | saturated read latency (900 in flight), p50 / p99 | {} / {} µs |\n\
         | same read in-process (find + open + lookup), p50 / p99 | {} / {} µs |\n\
         | same read in-process, map already open, p50 / p99 | {:.1} / {:.1} µs |\n\
         | paced p99 ratio daemon under load / in-process find | {:.1} |\n\
         | errors | {errs} |\n",
        READERS + STREAMS,
        READERS + STREAMS,
        lat.len(),
        lat.len() as f64 / secs as f64,
        pct(&lat, 0.5),
        p99,
        pct(&lat, 0.999),
        lat.last().copied().unwrap_or(0),
        pct(&gaps, 0.5),
        pct(&gaps, 0.99),
        gaps.last().copied().unwrap_or(0),
        (secs / 3).max(1),
        sat.len(),
        sat.len() as f64 / (secs / 3).max(1) as f64,
        pct(&sat, 0.5),
        pct(&sat, 0.99),
        pct(&direct, 0.5),
        pct(&direct, 0.99),
        f64::from(pct(&opened, 0.5)) / 1e3,
        f64::from(pct(&opened, 0.99)) / 1e3,
        p99 as f64 / d99 as f64,
    );
    print!("{report}");
    nfkit_corpus::write_bench_report("daemon-load.md", &report);
    drop(d);
    if errs > 0 {
        eprintln!(
            "daemon load bench: {errs} errors, first: {}",
            first_error.lock().map(|f| f.clone()).unwrap_or_default()
        );
        std::process::exit(1);
    }
}

type Loaded = (Vec<u32>, Vec<u32>, u64, f64);

/// One phase: 900 readers (paced or in a loop) and, when paced, 100
/// stats streams; read latencies (µs), stream gaps (ms), snapshots, and
/// the time to open the connections (ms).
fn load(
    rt: &tokio::runtime::Runtime,
    socket: &std::path::Path,
    secs: u64,
    paced: bool,
    errors: &Arc<AtomicU64>,
    first_error: &Arc<std::sync::Mutex<String>>,
) -> Loaded {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let n_streams = if paced { STREAMS } else { 0 };
    rt.block_on(async {
        let t_conn = Instant::now();
        let mut chans = Vec::new();
        for _ in 0..READERS + n_streams {
            chans.push(
                nfkit_daemon::client::channel(socket)
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
                    // Readers start spread over one pace period.
                    let pace = Duration::from_millis(PACE_MS);
                    let phase = pace * (i as u32) / READERS as u32;
                    let mut tick =
                        tokio::time::interval_at(tokio::time::Instant::now() + phase, pace);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                    while Instant::now() < deadline {
                        let due = if paced {
                            tick.tick().await.into_std()
                        } else {
                            Instant::now()
                        };
                        match c.get_entry(get_req()).await {
                            Ok(_) => lat.push(due.elapsed().as_micros() as u32),
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
                            top_entries: 0,
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
    })
}
