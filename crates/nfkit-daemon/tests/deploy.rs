//! gRPC end to end on a namespace testbed: deploy a chain through
//! nfkitd, count traffic in its map, register a second version and
//! redeploy it live (the map kept), edit the map, watch statistics,
//! kill -9 the daemon (the chain keeps processing), restart it (it
//! adopts the deployment with its chain version), undeploy. Needs root.

mod common;
use common::{is_root, my_ids, rt, script, Bed, Daemon, Scratch};
use nfkit_daemon::proto::chain_service_client::ChainServiceClient;
use nfkit_daemon::proto::daemon_service_client::DaemonServiceClient;
use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
use nfkit_daemon::proto::map_service_client::MapServiceClient;
use nfkit_daemon::proto::stats_service_client::StatsServiceClient;
use nfkit_daemon::proto::{self, script_source::Kind, AttachPoint};
use tonic::transport::Channel;
use tonic::Code;

fn seen(rt: &tokio::runtime::Runtime, m: &mut MapServiceClient<Channel>, key: &str) -> u64 {
    let e = rt
        .block_on(m.get_entry(proto::GetEntryRequest {
            map: Some(proto::MapRef {
                name: "seen".into(),
                ..Default::default()
            }),
            key: key.into(),
        }))
        .expect("get seen")
        .into_inner();
    e.value_text.parse().expect("a count")
}

#[test]
fn deploy_swap_map_edit_kill_restart_undeploy_through_the_daemon() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-deploy");
    let bed = Bed::new('d', 61);
    let (uid, _) = my_ids();
    let mut d = Daemon::start(&s, &format!("admin = {{ uids = [{uid}] }}"), "");
    let rt = rt();
    let ch = d.channel(&rt);
    let mut dep = DeploymentServiceClient::new(ch.clone());
    let mut maps = MapServiceClient::new(ch.clone());
    let v1 = script("count_v1.py");
    let req = proto::DeployRequest {
        script: Some(proto::ScriptSource {
            kind: Some(Kind::Inline(proto::InlineScript {
                file: "count_v1.py".into(),
                source: v1.clone(),
                source_path: "/tests/count_v1.py".into(),
            })),
        }),
        dev: bed.dev.clone(),
        netns: bed.sut.clone(),
        attach: AttachPoint::XdpGeneric as i32,
        mode: 0,
        post_devs: Vec::new(),
    };
    let r = rt.block_on(dep.deploy(req.clone())).unwrap().into_inner();
    let dd = r.deployment.unwrap();
    assert!(!r.swapped && dd.attached && dd.generation == 1);
    assert_eq!(dd.source, "/tests/count_v1.py");
    assert_eq!(dd.digest, nfkit_daemon::files::digest(v1.as_bytes()));
    assert!(bed.has_xdp());
    bed.send_udp(20);
    assert_eq!(seen(&rt, &mut maps, "0"), 20);

    // Version 2, registered, then deployed over version 1.
    let mut chains = ChainServiceClient::new(ch.clone());
    let reg = rt
        .block_on(chains.register_chain(proto::RegisterChainRequest {
            name: "count".into(),
            source: script("count_v2.py"),
        }))
        .unwrap()
        .into_inner();
    let v2 = reg.version.unwrap();
    let swap = proto::DeployRequest {
        script: Some(proto::ScriptSource {
            kind: Some(Kind::Chain(proto::ChainRef {
                name: "count".into(),
                version: 0,
            })),
        }),
        ..req.clone()
    };
    let r = rt.block_on(dep.redeploy(swap)).unwrap().into_inner();
    assert!(r.swapped, "a live swap");
    assert!(
        r.reused_maps.iter().any(|m| m == "seen"),
        "{:?}",
        r.reused_maps
    );
    let dd = r.deployment.unwrap();
    assert_eq!((dd.chain.as_str(), dd.chain_version), ("count", v2.version));
    assert_eq!(dd.generation, 2);
    bed.send_udp(10);
    assert_eq!(seen(&rt, &mut maps, "0"), 20, "the map was kept");
    assert_eq!(seen(&rt, &mut maps, "1"), 10);

    // Map edits; a bad key changes nothing.
    let set = |key: &str, value: &str| proto::SetEntryRequest {
        map: Some(proto::MapRef {
            name: "seen".into(),
            dev: bed.dev.clone(),
            attach: AttachPoint::XdpGeneric as i32,
        }),
        key: key.into(),
        value: value.into(),
    };
    rt.block_on(maps.set_entry(set("0", "5"))).unwrap();
    assert_eq!(seen(&rt, &mut maps, "0"), 5);
    let e = rt.block_on(maps.set_entry(set("zero", "7"))).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().starts_with("map `seen`: key"),
        "{}",
        e.message()
    );
    assert_eq!(seen(&rt, &mut maps, "0"), 5);
    let dump = rt
        .block_on(maps.dump_map(proto::DumpMapRequest {
            map: Some(proto::MapRef {
                name: "seen".into(),
                ..Default::default()
            }),
        }))
        .unwrap()
        .into_inner();
    assert_eq!(dump.entries.len(), 4);
    assert_eq!(dump.entries[1].value_text, "10");

    // A map watch: every entry, then what changed.
    let mut watch = rt
        .block_on(maps.watch_map(proto::WatchMapRequest {
            map: Some(proto::MapRef {
                name: "seen".into(),
                ..Default::default()
            }),
            interval_ms: 100,
            count: 2,
        }))
        .unwrap()
        .into_inner();
    let first = rt.block_on(watch.message()).unwrap().unwrap();
    assert!(first.initial && first.set.len() == 4);
    rt.block_on(maps.set_entry(set("3", "33"))).unwrap();
    let next = rt.block_on(watch.message()).unwrap().unwrap();
    assert!(!next.initial && next.removed.is_empty());
    let changed: Vec<(&str, &str)> = next
        .set
        .iter()
        .map(|e| (e.key_text.as_str(), e.value_text.as_str()))
        .collect();
    assert_eq!(changed, [("3", "33")]);
    assert!(
        rt.block_on(watch.message()).unwrap().is_none(),
        "count 2: the stream ends"
    );

    // Statistics: two snapshots with the chain's pass counter.
    let mut st = StatsServiceClient::new(ch.clone());
    let mut stream = rt
        .block_on(st.watch_stats(proto::WatchStatsRequest {
            interval_ms: 100,
            count: 2,
            dev: String::new(),
            top_entries: 3,
        }))
        .unwrap()
        .into_inner();
    let mut snaps = Vec::new();
    while let Some(m) = rt.block_on(stream.message()).unwrap() {
        snaps.push(m);
    }
    assert_eq!(snaps.len(), 2);
    let c = &snaps[1].deployments[0].chains;
    let pass: u64 = c.iter().filter_map(|c| c.counts.get("PASS")).sum();
    assert!(pass >= 10, "{c:?}");
    // With the top entries of the map, as the map reads give them.
    let seen_top = snaps[1].deployments[0]
        .maps
        .iter()
        .find(|m| m.name == "seen")
        .unwrap_or_else(|| panic!("{:?}", snaps[1]));
    assert!(seen_top.entries.len() <= 3 && !seen_top.entries.is_empty());
    let largest = &seen_top.entries[0];
    assert_eq!(
        largest.value_text,
        seen(&rt, &mut maps, &largest.key_text).to_string()
    );

    // kill -9: the chain keeps running; a new daemon adopts it.
    d.kill9();
    bed.send_udp(7);
    d.restart();
    let ch = d.channel(&rt);
    let mut maps = MapServiceClient::new(ch.clone());
    assert_eq!(seen(&rt, &mut maps, "1"), 17, "counted while no daemon ran");
    let info = rt
        .block_on(DaemonServiceClient::new(ch.clone()).get_info(proto::GetInfoRequest {}))
        .unwrap()
        .into_inner();
    let a = &info.adopted;
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(
        (a[0].dev.as_str(), a[0].outcome.as_str()),
        (bed.dev.as_str(), "adopted")
    );
    let want = format!("chain count@{}", v2.version);
    assert!(a[0].detail.contains(&want), "{}", a[0].detail);
    let mut dep = DeploymentServiceClient::new(ch.clone());
    let list = rt
        .block_on(dep.list_deployments(proto::ListDeploymentsRequest {}))
        .unwrap()
        .into_inner();
    assert_eq!(list.deployments.len(), 1);
    assert_eq!(list.deployments[0].digest, v2.digest);

    // Undeploy.
    let gone = rt
        .block_on(dep.undeploy(proto::UndeployRequest {
            dev: bed.dev.clone(),
        }))
        .unwrap()
        .into_inner();
    assert_eq!(gone.removed.len(), 1);
    assert!(!bed.has_xdp());
    let list = rt
        .block_on(dep.list_deployments(proto::ListDeploymentsRequest {}))
        .unwrap()
        .into_inner();
    assert!(list.deployments.is_empty());

    // Every change is in the audit log, deploys with their digests.
    let audit = d.audit_lines();
    let rpcs: Vec<&str> = audit.iter().map(|l| l["rpc"].as_str().unwrap()).collect();
    assert_eq!(
        rpcs,
        [
            "nfkit.v1.DeploymentService/Deploy",
            "nfkit.v1.ChainService/RegisterChain",
            "nfkit.v1.DeploymentService/Redeploy",
            "nfkit.v1.MapService/SetEntry",
            "nfkit.v1.MapService/SetEntry",
            "nfkit.v1.MapService/SetEntry",
            "nfkit.v1.DeploymentService/Undeploy",
        ]
    );
    assert_eq!(audit[2]["digest"], v2.digest);
    assert_eq!(audit[2]["target"], format!("{} xdp-generic", bed.dev));
    assert_eq!(audit[4]["result"], "refused");
}

/// A deploy interrupted by a crash: the next start reports it finished
/// (the new version had switched) or rolled back (the old one runs),
/// and records what runs.
#[test]
fn an_interrupted_deploy_is_finished_or_rolled_back_at_the_next_start() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-intent");
    let bed = Bed::new('i', 62);
    let (uid, _) = my_ids();
    let mut d = Daemon::start(&s, &format!("admin = {{ uids = [{uid}] }}"), "");
    let rt = rt();
    let mut dep = DeploymentServiceClient::new(d.channel(&rt));
    let v1 = script("count_v1.py");
    let r = rt
        .block_on(dep.deploy(proto::DeployRequest {
            script: Some(proto::ScriptSource {
                kind: Some(Kind::Inline(proto::InlineScript {
                    file: "count_v1.py".into(),
                    source: v1.clone(),
                    source_path: String::new(),
                })),
            }),
            dev: bed.dev.clone(),
            netns: bed.sut.clone(),
            attach: AttachPoint::XdpGeneric as i32,
            mode: 0,
            post_devs: Vec::new(),
        }))
        .unwrap()
        .into_inner();
    let gen = r.deployment.unwrap().generation;
    d.kill9();
    let records = d.dir.join("run/deployments.json");
    let intent = |before: serde_json::Value| {
        let mut rec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&records).unwrap()).unwrap();
        rec["pending"] = serde_json::json!({
            "file": "count_v2.py", "source": script("count_v2.py"), "source_path": "count_v2.py",
            "dev": bed.dev, "netns": bed.sut, "attach": "xdp-generic", "mode": "static",
            "chain": "", "chain_version": 0, "digest": "sha256:v2", "before": before,
        });
        std::fs::write(&records, rec.to_string()).unwrap();
    };
    let outcomes = |d: &Daemon| {
        let info = rt
            .block_on(DaemonServiceClient::new(d.channel(&rt)).get_info(proto::GetInfoRequest {}))
            .unwrap()
            .into_inner();
        info.adopted
            .iter()
            .map(|a| a.outcome.clone())
            .collect::<Vec<_>>()
    };
    // Crashed before the switch: the deployment is as it was.
    intent(serde_json::json!([[bed.dev, "xdp-generic", gen]]));
    d.restart();
    assert_eq!(outcomes(&d), ["rolled back", "adopted"]);
    let dig = |d: &Daemon| {
        let l = rt
            .block_on(
                DeploymentServiceClient::new(d.channel(&rt))
                    .list_deployments(proto::ListDeploymentsRequest {}),
            )
            .unwrap()
            .into_inner();
        l.deployments[0].digest.clone()
    };
    assert_eq!(dig(&d), nfkit_daemon::files::digest(v1.as_bytes()));
    d.kill9();
    // Crashed after the switch (the generation moved on): finished.
    intent(serde_json::json!([[bed.dev, "xdp-generic", gen - 1]]));
    d.restart();
    assert_eq!(outcomes(&d), ["finished", "adopted"]);
    assert_eq!(dig(&d), "sha256:v2");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&records).unwrap()).unwrap();
    assert!(rec.get("pending").is_none(), "the intent is done with");
}
