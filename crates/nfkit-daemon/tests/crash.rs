//! kill -9 of nfkitd in the middle of deploys, under traffic: after each
//! kill a new daemon starts and adopts one consistent deployment (its
//! link runs the program nfkit's state names, the version is v1 or v2,
//! nothing pending), and no packet went unprocessed: the two versions'
//! counters (one map, kept across swaps) add up to every datagram sent.
//! 100 deploys (about 8 s; `NFKIT_CRASH_DEPLOYS` changes it).
//! Needs root.

mod common;
use common::{is_root, my_ids, rt, script, Bed, Daemon, Scratch};
use nfkit_daemon::proto::daemon_service_client::DaemonServiceClient;
use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
use nfkit_daemon::proto::map_service_client::MapServiceClient;
use nfkit_daemon::proto::{self, script_source::Kind, AttachPoint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn deploy_req(bed: &Bed, file: &str) -> proto::DeployRequest {
    proto::DeployRequest {
        script: Some(proto::ScriptSource {
            kind: Some(Kind::Inline(proto::InlineScript {
                file: file.into(),
                source: script(file),
                source_path: file.into(),
            })),
        }),
        dev: bed.dev.clone(),
        netns: bed.sut.clone(),
        attach: AttachPoint::XdpGeneric as i32,
        mode: 0,
        post_devs: Vec::new(),
    }
}

fn entry(d: &Daemon, rt: &tokio::runtime::Runtime, key: &str) -> u64 {
    let e = rt
        .block_on(
            MapServiceClient::new(d.channel(rt)).get_entry(proto::GetEntryRequest {
                map: Some(proto::MapRef {
                    name: "seen".into(),
                    ..Default::default()
                }),
                key: key.into(),
            }),
        )
        .expect("get seen")
        .into_inner();
    e.value_text.parse().expect("a count")
}

fn set_zero(d: &Daemon, rt: &tokio::runtime::Runtime, key: &str) {
    rt.block_on(
        MapServiceClient::new(d.channel(rt)).set_entry(proto::SetEntryRequest {
            map: Some(proto::MapRef {
                name: "seen".into(),
                ..Default::default()
            }),
            key: key.into(),
            value: "0".into(),
        }),
    )
    .expect("reset seen");
}

#[test]
fn kill9_during_deploys_under_traffic_leaves_a_consistent_adopted_state() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let rounds: u64 = std::env::var("NFKIT_CRASH_DEPLOYS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let s = Scratch::new("dmn-crash");
    let bed = Bed::new('k', 65);
    let (uid, _) = my_ids();
    let mut d = Daemon::start(&s, &format!("admin = {{ uids = [{uid}] }}"), "");
    let rt = rt();
    rt.block_on(
        DeploymentServiceClient::new(d.channel(&rt)).deploy(deploy_req(&bed, "count_v1.py")),
    )
    .expect("first deploy");
    // Neighbour resolution first, then counters from zero.
    bed.send_udp(1);
    set_zero(&d, &rt, "0");
    set_zero(&d, &rt, "1");

    let stop = Arc::new(AtomicBool::new(false));
    let (ns, to, stop2) = (
        bed.sender.clone(),
        format!("198.18.{}.1:9999", bed.net),
        stop.clone(),
    );
    let sender = std::thread::spawn(move || {
        nfkit_kernel::deploy::enter_netns(&ns).expect("enter sender netns");
        let sock = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
        let mut sent = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            sock.send_to(&sent.to_be_bytes(), &to).expect("send");
            sent += 1;
            std::thread::sleep(Duration::from_micros(500));
        }
        sent
    });

    let digests = [
        nfkit_daemon::files::digest(script("count_v1.py").as_bytes()),
        nfkit_daemon::files::digest(script("count_v2.py").as_bytes()),
    ];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
    for i in 0..rounds {
        let file = if i % 2 == 0 {
            "count_v2.py"
        } else {
            "count_v1.py"
        };
        let req = deploy_req(&bed, file);
        let socket = d.socket.clone();
        let client = std::thread::spawn(move || {
            let rt = common::rt();
            let ch = rt.block_on(nfkit_daemon::client::channel(&socket)).ok()?;
            rt.block_on(DeploymentServiceClient::new(ch).deploy(req))
                .ok()
        });
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(rng % 60));
        d.kill9();
        let _ = client.join();
        d.restart();
        let ch = d.channel(&rt);
        let info = rt
            .block_on(DaemonServiceClient::new(ch.clone()).get_info(proto::GetInfoRequest {}))
            .expect("info")
            .into_inner();
        for a in &info.adopted {
            *outcomes.entry(a.outcome.clone()).or_default() += 1;
        }
        assert!(
            info.adopted
                .iter()
                .all(|a| ["adopted", "finished", "rolled back"].contains(&a.outcome.as_str())),
            "round {i}: {:?}",
            info.adopted
        );
        let l = rt
            .block_on(
                DeploymentServiceClient::new(ch).list_deployments(proto::ListDeploymentsRequest {}),
            )
            .expect("list")
            .into_inner();
        assert_eq!(l.deployments.len(), 1, "round {i}");
        let dep = &l.deployments[0];
        assert!(dep.attached, "round {i}: detached");
        assert_eq!(
            dep.live_prog_id, dep.prog_id,
            "round {i}: link and state disagree"
        );
        assert!(
            digests.contains(&dep.digest),
            "round {i}: digest {:?}",
            dep.digest
        );
        let rec = std::fs::read_to_string(d.dir.join("run/deployments.json")).unwrap();
        assert!(
            !rec.contains("\"pending\""),
            "round {i}: an intent left over"
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().expect("sender");
    std::thread::sleep(Duration::from_millis(300));
    let counted = entry(&d, &rt, "0") + entry(&d, &rt, "1");
    eprintln!("{rounds} killed deploys: {outcomes:?}; {sent} datagrams sent, {counted} counted");
    assert!(sent > 0);
    assert_eq!(
        counted, sent,
        "every datagram went through one version or the other"
    );
}
