//! The Prometheus exposition: after a deploy and traffic on a namespace
//! testbed, a scrape parses (prometheus-parse), its per-chain verdict
//! counters equal the deployment's nfkit_stats map as ListDeployments
//! reads it, its map occupancy equals the map's entries, and the
//! request and deploy counters count what was done. Needs root.

mod common;
use common::{is_root, my_ids, rt, script, Bed, Daemon, Scratch};
use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
use nfkit_daemon::proto::map_service_client::MapServiceClient;
use nfkit_daemon::proto::{self, script_source::Kind, AttachPoint};
use std::io::{Read as _, Write as _};

/// `GET /metrics` over a plain TCP connection; the body.
fn scrape(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP reply");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

fn value(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

/// A daemon with metrics on a free loopback port, `file` (a test
/// script) deployed on a fresh testbed through it: the scratch
/// directory, testbed, daemon, metrics port, runtime and channel (bind
/// them in this order: they drop in reverse).
fn deployed(
    scratch: &str,
    id: char,
    net: u8,
    file: &str,
) -> (
    Scratch,
    Bed,
    Daemon,
    u16,
    tokio::runtime::Runtime,
    tonic::transport::Channel,
) {
    let s = Scratch::new(scratch);
    let bed = Bed::new(id, net);
    let (uid, _) = my_ids();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = Daemon::start(
        &s,
        &format!("admin = {{ uids = [{uid}] }}"),
        &format!("metrics = \"127.0.0.1:{port}\""),
    );
    let rt = rt();
    let ch = d.channel(&rt);
    let mut dep = DeploymentServiceClient::new(ch.clone());
    rt.block_on(dep.deploy(deploy_request(&bed, file))).unwrap();
    (s, bed, d, port, rt, ch)
}

/// Deploy the test script `file` at generic XDP on the testbed's device
/// (a live swap when something is deployed there already).
fn deploy_request(bed: &Bed, file: &str) -> proto::DeployRequest {
    proto::DeployRequest {
        script: Some(proto::ScriptSource {
            kind: Some(Kind::Inline(proto::InlineScript {
                file: file.into(),
                source: script(file),
                source_path: String::new(),
            })),
        }),
        dev: bed.dev.clone(),
        netns: bed.sut.clone(),
        attach: AttachPoint::XdpGeneric as i32,
        mode: 0,
        post_devs: Vec::new(),
    }
}

#[test]
fn a_scrape_parses_and_its_counters_equal_the_maps() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (_s, bed, _d, port, rt, ch) = deployed("dmn-metrics", 'm', 63, "count_v1.py");
    let mut dep = DeploymentServiceClient::new(ch.clone());
    bed.send_udp(25);
    let body = scrape(port);
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let sc = prometheus_parse::Scrape::parse(lines).expect("the scrape parses");
    let list = rt
        .block_on(dep.list_deployments(proto::ListDeploymentsRequest {}))
        .unwrap()
        .into_inner();
    let chains = &list.deployments[0].verdicts;
    assert!(!chains.is_empty());
    for c in chains {
        for (verdict, n) in &c.counts {
            let got = value(
                &sc,
                "nfkit_chain_packets_total",
                &[("dev", &bed.dev), ("chain", &c.chain), ("verdict", verdict)],
            );
            // Traffic between the two reads (neighbour discovery) may add a little.
            let got = got.unwrap_or_else(|| panic!("no {} {verdict} in:\n{body}", c.chain));
            assert!(
                got <= *n as f64 && got + 3.0 >= *n as f64,
                "{verdict}: {got} vs {n}"
            );
        }
    }
    let udp_counted = value(&sc, "nfkit_chain_packets_total", &[("verdict", "PASS")]).unwrap();
    assert!(udp_counted >= 25.0);
    let dump = rt
        .block_on(
            MapServiceClient::new(ch.clone()).dump_map(proto::DumpMapRequest {
                map: Some(proto::MapRef {
                    name: "seen".into(),
                    ..Default::default()
                }),
            }),
        )
        .unwrap()
        .into_inner();
    let nonzero = dump.entries.iter().filter(|e| e.value_text != "0").count();
    assert_eq!(nonzero, 1);
    assert_eq!(
        value(&sc, "nfkit_map_entries", &[("map", "seen")]),
        Some(nonzero as f64),
        "{body}"
    );
    assert_eq!(
        value(
            &sc,
            "nfkitd_requests_total",
            &[("rpc", "nfkit.v1.DeploymentService/Deploy"), ("code", "OK")]
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        value(&sc, "nfkitd_deploy_seconds_count", &[]),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        value(&sc, "nfkit_deployment_attached", &[("dev", &bed.dev)]),
        Some(1.0)
    );
    assert_eq!(
        value(&sc, "nfkitd_swap_seconds_count", &[]),
        Some(0.0),
        "{body}"
    );

    // A live swap on the same device: the deploy histogram gets its
    // second observation, the swap histogram (the link update alone)
    // its first.
    rt.block_on(dep.deploy(deploy_request(&bed, "count_v2.py")))
        .unwrap();
    let body = scrape(port);
    let sc = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("the scrape parses");
    assert_eq!(
        value(&sc, "nfkitd_deploy_seconds_count", &[]),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        value(&sc, "nfkitd_swap_seconds_count", &[]),
        Some(1.0),
        "{body}"
    );
    let swap = value(&sc, "nfkitd_swap_seconds_sum", &[]).expect("a swap sum");
    assert!(swap > 0.0 && swap < 1.0, "swap {swap} s\n{body}");
}

#[test]
fn faults_reach_the_scrape_and_the_streams_which_share_their_reads() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    use nfkit_daemon::proto::stats_service_client::StatsServiceClient;
    let (_s, bed, _d, port, rt, ch) = deployed("dmn-faults", 'f', 66, "faults.py");
    let mut dep = DeploymentServiceClient::new(ch.clone());
    bed.send_udp(20);
    let list = rt
        .block_on(dep.list_deployments(proto::ListDeploymentsRequest {}))
        .unwrap()
        .into_inner();
    let chain = list.deployments[0]
        .verdicts
        .iter()
        .find(|c| c.chain == "check")
        .expect("the chain's counters");
    let faults = chain.counts.get("FAULT").copied().unwrap_or(0);
    assert_eq!(faults, 20, "{chain:?}");
    assert_eq!(chain.faults, faults);
    // The scrape.
    let body = scrape(port);
    let sc = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("the scrape parses");
    assert_eq!(
        value(
            &sc,
            "nfkit_chain_faults_total",
            &[("dev", &bed.dev), ("chain", "check")]
        ),
        Some(20.0),
        "{body}"
    );
    // The stream.
    let mut st = StatsServiceClient::new(ch.clone());
    let snap = rt.block_on(async {
        let mut s = st
            .watch_stats(proto::WatchStatsRequest {
                interval_ms: 100,
                count: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        s.message().await.unwrap().expect("a snapshot")
    });
    let dd = &snap.deployments[0];
    assert_eq!(dd.faults, 20);
    assert_eq!(
        dd.chains
            .iter()
            .find(|c| c.chain == "check")
            .map(|c| c.faults),
        Some(20)
    );
    // 20 streams of 5 snapshots at 200 ms: the ticks after the first
    // fall together and share one read of the counters.
    let reads = |sc: &prometheus_parse::Scrape| value(sc, "nfkitd_stats_reads_total", &[]);
    let before = reads(&sc).expect("nfkitd_stats_reads_total");
    let stamps: Vec<Vec<u64>> = rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let mut c = StatsServiceClient::new(ch.clone());
            tasks.push(tokio::spawn(async move {
                let mut s = c
                    .watch_stats(proto::WatchStatsRequest {
                        interval_ms: 200,
                        count: 5,
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner();
                let mut at = Vec::new();
                while let Some(m) = s.message().await.unwrap() {
                    assert_eq!(m.deployments[0].faults, 20);
                    at.push(m.unix_ms);
                }
                at
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    assert!(stamps.iter().all(|s| s.len() == 5), "{stamps:?}");
    let mut ticks: Vec<u64> = stamps.iter().flat_map(|s| s[1..].to_vec()).collect();
    ticks.sort_unstable();
    ticks.dedup();
    // 80 snapshots after the first ones; 4 ticks each, two tick sets at
    // most (streams started on both sides of a half-interval).
    assert!(
        ticks.len() <= 8,
        "{} distinct reads: {ticks:?}",
        ticks.len()
    );
    let sc =
        prometheus_parse::Scrape::parse(scrape(port).lines().map(|l| Ok(l.to_string()))).unwrap();
    let made = reads(&sc).unwrap() - before;
    assert!(
        (4.0..=28.0).contains(&made),
        "{made} reads for 100 snapshots"
    );
}
