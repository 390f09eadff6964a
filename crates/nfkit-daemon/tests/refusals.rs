//! At least 1000 fuzzed, malformed and wrong-role requests: each is
//! refused with the code its fault calls for, nothing changes, the
//! daemon keeps serving, and the audit log has one record per request
//! with who sent it and why it was refused. Callers without a role or
//! with a lower one are child processes running as other uids. Needs root.

mod common;
use common::{is_root, my_ids, rt, Daemon, Scratch};
use nfkit_daemon::proto::chain_service_client::ChainServiceClient;
use nfkit_daemon::proto::daemon_service_client::DaemonServiceClient;
use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
use nfkit_daemon::proto::map_service_client::MapServiceClient;
use nfkit_daemon::proto::stats_service_client::StatsServiceClient;
use nfkit_daemon::proto::switch_service_client::SwitchServiceClient;
use nfkit_daemon::proto::{self, script_source::Kind};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use tonic::Code;

/// xorshift64*: reproducible fuzz input without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// A string of `len` characters drawn from `alphabet`.
    fn text(&mut self, alphabet: &[char], len: usize) -> String {
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
            .collect()
    }
}

const NOISE: &[char] = &[
    'a', 'Z', '0', '/', '.', ' ', '\n', '\t', '\0', '*', '$', 'é', '中', '-', '_', ':', '\u{7f}',
];

/// A name that is never valid where `limit` characters of
/// [A-Za-z0-9_.-] are: too long, or with a character outside the set.
fn bad_name(r: &mut Rng, limit: usize) -> String {
    if r.below(3) == 0 {
        "x".repeat(limit + 1 + r.below(40) as usize)
    } else {
        let len = 1 + r.below(10) as usize;
        let mut s = r.text(NOISE, len);
        s.push(['/', ' ', '\n', '*', 'é'][r.below(5) as usize]);
        s
    }
}

fn inline(source: String) -> Option<proto::ScriptSource> {
    Some(proto::ScriptSource {
        kind: Some(Kind::Inline(proto::InlineScript {
            file: "fuzz.py".into(),
            source,
            source_path: String::new(),
        })),
    })
}

/// Kinds of malformed requests [`malformed`] sends.
const KINDS: u64 = 18;

/// One malformed request of kind `k`, sent; its status code.
fn malformed(
    rt: &tokio::runtime::Runtime,
    ch: &tonic::transport::Channel,
    r: &mut Rng,
    k: u64,
) -> Code {
    let mut dep = DeploymentServiceClient::new(ch.clone());
    let mut maps = MapServiceClient::new(ch.clone());
    let mut chains = ChainServiceClient::new(ch.clone());
    let mut switches = SwitchServiceClient::new(ch.clone());
    let ok_script = || inline("every_packet(lambda: PASS)\n".into());
    let res: Result<(), tonic::Status> = rt.block_on(async {
        match k {
            0 => dep
                .deploy(proto::DeployRequest {
                    script: ok_script(),
                    dev: bad_name(r, 15),
                    ..Default::default()
                })
                .await
                .map(drop),
            1 => dep
                .deploy(proto::DeployRequest {
                    script: ok_script(),
                    dev: "lo".into(),
                    attach: 5 + r.below(1000) as i32,
                    ..Default::default()
                })
                .await
                .map(drop),
            2 => dep
                .deploy(proto::DeployRequest {
                    script: ok_script(),
                    dev: "lo".into(),
                    mode: -1 - r.below(1000) as i32,
                    ..Default::default()
                })
                .await
                .map(drop),
            3 => dep
                .deploy(proto::DeployRequest {
                    script: None,
                    dev: "lo".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
            4 => dep
                .redeploy(proto::DeployRequest {
                    script: Some(proto::ScriptSource {
                        kind: Some(Kind::Chain(proto::ChainRef {
                            name: bad_name(r, 64),
                            version: r.below(5) as u32,
                        })),
                    }),
                    dev: "lo".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
            5 => {
                let mut src = r.text(NOISE, 20);
                src.push('\0');
                dep.deploy(proto::DeployRequest {
                    script: inline(src),
                    dev: "lo".into(),
                    netns: if r.below(2) == 0 {
                        bad_name(r, 64)
                    } else {
                        String::new()
                    },
                    ..Default::default()
                })
                .await
                .map(drop)
            }
            6 => dep
                .deploy(proto::DeployRequest {
                    // Over the configured 64 KiB request limit.
                    script: inline("#".repeat(70_000 + r.below(10_000) as usize)),
                    dev: "lo".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
            7 => maps
                .set_entry(proto::SetEntryRequest {
                    map: Some(proto::MapRef {
                        name: bad_name(r, 64),
                        ..Default::default()
                    }),
                    key: "1".into(),
                    value: "2".into(),
                })
                .await
                .map(drop),
            8 => maps
                .delete_entry(proto::DeleteEntryRequest {
                    map: if r.below(2) == 0 {
                        None
                    } else {
                        Some(proto::MapRef {
                            name: "seen".into(),
                            dev: String::new(),
                            attach: 9 + r.below(100) as i32,
                        })
                    },
                    key: "1".into(),
                })
                .await
                .map(drop),
            9 => maps
                .set_entry(proto::SetEntryRequest {
                    map: Some(proto::MapRef {
                        name: "seen".into(),
                        ..Default::default()
                    }),
                    key: format!("{}\n", r.next()),
                    value: if r.below(2) == 0 {
                        String::new()
                    } else {
                        "x".repeat(5000)
                    },
                })
                .await
                .map(drop),
            10 => chains
                .register_chain(proto::RegisterChainRequest {
                    name: bad_name(r, 64),
                    source: "every_packet(lambda: PASS)\n".into(),
                })
                .await
                .map(drop),
            11 => dep
                .undeploy(proto::UndeployRequest {
                    dev: bad_name(r, 15),
                })
                .await
                .map(drop),
            12 => switches
                .deploy_switch(proto::DeploySwitchRequest {
                    name: bad_name(r, 64),
                    ports: vec!["p0:afpacket".into()],
                    script: ok_script(),
                    ..Default::default()
                })
                .await
                .map(drop),
            13 => switches
                .deploy_switch(proto::DeploySwitchRequest {
                    name: "fz".into(),
                    // Over the 64 ports a switch may have.
                    ports: (0..65 + r.below(10))
                        .map(|i| format!("p{i}:afpacket"))
                        .collect(),
                    script: ok_script(),
                    ..Default::default()
                })
                .await
                .map(drop),
            14 => {
                let (workers, engine) = if r.below(2) == 0 {
                    (65 + r.below(1000) as u32, String::new())
                } else {
                    (1, format!("{}x", r.text(NOISE, 3)))
                };
                switches
                    .deploy_switch(proto::DeploySwitchRequest {
                        name: "fz".into(),
                        ports: vec!["p0:afpacket".into()],
                        script: ok_script(),
                        workers,
                        engine,
                        ..Default::default()
                    })
                    .await
                    .map(drop)
            }
            15 => switches
                .redeploy_switch(proto::RedeploySwitchRequest {
                    name: bad_name(r, 64),
                    script: ok_script(),
                })
                .await
                .map(drop),
            16 => switches
                .undeploy_switch(proto::UndeploySwitchRequest {
                    name: bad_name(r, 64),
                })
                .await
                .map(drop),
            _ => {
                let mut s = StatsServiceClient::new(ch.clone());
                s.watch_stats(proto::WatchStatsRequest {
                    interval_ms: [1, 99, 60_001, u32::MAX][r.below(4) as usize],
                    count: 1,
                    dev: String::new(),
                    top_entries: 0,
                })
                .await
                .map(drop)
            }
        }
    });
    match res {
        Ok(()) => Code::Ok,
        Err(s) => s.code(),
    }
}

/// Raw bytes as a gRPC message: requests tonic refuses before any
/// handler (unknown methods, bytes that are not the request's protobuf,
/// messages over the decoding limit).
#[derive(Clone, Copy, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut as _;
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf as _;
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// Sends `body` to `path` as it is; the status code.
fn raw(
    rt: &tokio::runtime::Runtime,
    ch: &tonic::transport::Channel,
    path: &str,
    body: Vec<u8>,
) -> Code {
    rt.block_on(async {
        let mut g = tonic::client::Grpc::new(ch.clone());
        g.ready().await.expect("ready");
        let path =
            tonic::codegen::http::uri::PathAndQuery::try_from(path.to_string()).expect("path");
        match g.unary(tonic::Request::new(body), path, Raw).await {
            Ok(_) => Code::Ok,
            Err(s) => s.code(),
        }
    })
}

/// Runs the helper below as `uid`; its code counts.
fn as_user(d: &Daemon, uid: u32, n: usize) -> BTreeMap<String, usize> {
    // A copy other users can run, whatever the permissions of the
    // directories the test binary was built in.
    use std::os::unix::fs::PermissionsExt as _;
    let exe = d.dir.join("refusals-helper");
    if !exe.exists() {
        std::fs::copy(std::env::current_exe().expect("test binary"), &exe).expect("copy helper");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let out = Command::new(&exe)
        .args(["--ignored", "--exact", "other_user_client", "--nocapture"])
        .env("DMN_SOCKET", &d.socket)
        .env("DMN_N", n.to_string())
        .uid(uid)
        .gid(uid)
        .output()
        .expect("run helper");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("CODES "))
        .unwrap_or_else(|| {
            panic!(
                "helper said: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).expect("codes JSON")
}

/// Run by [`as_user`] in a child process with another uid: `DMN_N`
/// deploys and as many chain registrations; prints the codes it got.
#[test]
#[ignore = "a helper: run as another user by fuzzed_malformed_and_wrong_role_requests_are_refused"]
fn other_user_client() {
    let (Some(sock), Some(n)) = (std::env::var_os("DMN_SOCKET"), std::env::var_os("DMN_N")) else {
        return;
    };
    let n: usize = n.to_str().and_then(|s| s.parse().ok()).expect("DMN_N");
    let rt = rt();
    let ch = rt
        .block_on(nfkit_daemon::client::channel(std::path::Path::new(&sock)))
        .expect("connect");
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..n {
        let mut dep = DeploymentServiceClient::new(ch.clone());
        let mut chains = ChainServiceClient::new(ch.clone());
        let r = rt.block_on(async {
            if i % 2 == 0 {
                dep.deploy(proto::DeployRequest {
                    script: inline("every_packet(lambda: PASS)\n".into()),
                    dev: "lo".into(),
                    ..Default::default()
                })
                .await
                .map(drop)
            } else {
                chains
                    .register_chain(proto::RegisterChainRequest {
                        name: "mine".into(),
                        source: "x".into(),
                    })
                    .await
                    .map(drop)
            }
        });
        let c = r.err().map_or(Code::Ok, |s| s.code());
        *codes.entry(format!("{c:?}")).or_default() += 1;
    }
    println!("CODES {}", serde_json::to_string(&codes).expect("json"));
    let _ = std::io::stdout().flush();
}

#[test]
fn fuzzed_malformed_and_wrong_role_requests_are_refused() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-refusals");
    let (uid, _) = my_ids();
    // This process may deploy (not administer); nobody may read; uid
    // 65533 has no role.
    let d = Daemon::start(
        &s,
        &format!("admin = {{ uids = [] }}\ndeploy = {{ uids = [{uid}] }}\nread_only = {{ uids = [65534] }}"),
        "max_request_bytes = 65536",
    );
    // Other users reach the socket and the helper whatever the umask.
    use std::os::unix::fs::PermissionsExt as _;
    for dir in [&s.dir, &d.dir] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let rt = rt();
    let ch = d.channel(&rt);
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut sent = 0usize;
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..900u64 {
        let c = malformed(&rt, &ch, &mut r, i % KINDS);
        assert_eq!(c, Code::InvalidArgument, "request {i} (kind {})", i % KINDS);
        *codes.entry(format!("{c:?}")).or_default() += 1;
        sent += 1;
    }
    // Deploy may not administer.
    let mut adm = DaemonServiceClient::new(ch.clone());
    for _ in 0..50 {
        let e = rt
            .block_on(adm.shutdown(proto::ShutdownRequest {}))
            .unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        sent += 1;
    }
    // Read-only (nobody) and no role (65533), from child processes.
    for (u, why) in [(65534, "needs role deploy"), (65533, "has no role")] {
        let got = as_user(&d, u, 60);
        assert_eq!(
            got.get("PermissionDenied"),
            Some(&60),
            "uid {u}: {got:?} ({why})"
        );
        sent += 60;
    }
    // Refused by tonic before any handler, audited by the gate: unknown
    // methods and services, bytes that are not protobuf, messages over
    // the decoding limit (64 KiB + 64 KiB of slack).
    let mut early = BTreeMap::new();
    for i in 0..30u64 {
        let (path, body, kind) = match i % 3 {
            0 => (
                ["/nfkit.v1.MapService/NoSuch", "/nfkit.v9.Nope/Get"][(i / 3 % 2) as usize],
                vec![],
                "unknown",
            ),
            // Field 1, length-delimited, with a length past the end.
            1 => (
                "/nfkit.v1.MapService/GetEntry",
                vec![0x0a, 0xff, 0xff, 0xff, 0x0f, 1, 2],
                "protobuf",
            ),
            _ => (
                "/nfkit.v1.ChainService/RegisterChain",
                vec![b'#'; 140_000 + r.below(10_000) as usize],
                "oversize",
            ),
        };
        let c = raw(&rt, &ch, path, body);
        assert_ne!(c, Code::Ok, "{kind} request {i}");
        *early.entry(kind).or_insert(0) += 1;
        sent += 1;
    }
    // Garbage on the socket (not HTTP/2) does not stop the daemon.
    for i in 0..20u8 {
        if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&d.socket) {
            let _ = s.write_all(&[i; 300]);
        }
    }
    let info = rt.block_on(adm.get_info(proto::GetInfoRequest {}));
    assert!(info.is_ok(), "still serving");
    // Nothing changed.
    let mut dep = DeploymentServiceClient::new(ch.clone());
    let l = rt
        .block_on(dep.list_deployments(proto::ListDeploymentsRequest {}))
        .unwrap()
        .into_inner();
    assert!(l.deployments.is_empty());
    let mut chains = ChainServiceClient::new(ch.clone());
    let l = rt
        .block_on(chains.list_chains(proto::ListChainsRequest::default()))
        .unwrap()
        .into_inner();
    assert!(l.versions.is_empty());
    let l = rt
        .block_on(
            SwitchServiceClient::new(ch.clone())
                .list_switches(proto::ListSwitchesRequest::default()),
        )
        .unwrap()
        .into_inner();
    assert!(l.switches.is_empty(), "{:?}", l.switches);
    assert!(sent >= 1000, "{sent} requests");
    // The audit log: one refusal per request, who and why.
    let audit = d.audit_lines();
    assert_eq!(audit.len(), sent, "one record per refused request");
    assert!(audit.iter().all(|l| l["result"] == "refused"));
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| audit.iter().filter(|l| f(l)).count();
    assert_eq!(
        count(&|l| l["code"] == "INVALID_ARGUMENT" && l["who"]["uid"] == uid),
        900
    );
    assert_eq!(
        count(
            &|l| l["code"] == "PERMISSION_DENIED" && l["rpc"] == "nfkit.v1.DaemonService/Shutdown"
        ),
        50
    );
    assert_eq!(
        count(&|l| l["who"]["uid"] == 65534 && l["who"]["role"] == "read-only"),
        60
    );
    assert_eq!(
        count(&|l| l["who"]["uid"] == 65533 && l["who"]["role"].is_null()),
        60
    );
    assert!(audit
        .iter()
        .all(|l| !l["message"].as_str().unwrap_or("").is_empty()));
    // The requests tonic refused: one record each, with who sent them.
    let mine = |l: &serde_json::Value| l["who"]["uid"] == uid && l["who"]["role"] == "deploy";
    assert_eq!(
        count(&|l| mine(l) && l["rpc"] == "(unknown)" && l["code"] == "UNIMPLEMENTED"),
        10,
        "unknown methods"
    );
    assert_eq!(
        count(&|l| mine(l) && l["target"] == "/nfkit.v9.Nope/Get"),
        5,
        "the unknown path is the target"
    );
    assert_eq!(
        count(&|l| mine(l)
            && l["rpc"] == "nfkit.v1.MapService/GetEntry"
            && l["message"].as_str().unwrap_or("").contains("decode")),
        10,
        "bad protobuf"
    );
    assert_eq!(
        count(&|l| mine(l)
            && l["rpc"] == "nfkit.v1.ChainService/RegisterChain"
            && l["message"].as_str().unwrap_or("").contains("too large")),
        10,
        "oversize"
    );
    assert_eq!(early.values().sum::<i32>(), 30);
}
