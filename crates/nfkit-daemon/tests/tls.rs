//! nfkitd over TCP with mutual TLS on 127.0.0.1 (a port the kernel
//! picks): a client whose certificate maps to the deploy role registers
//! and reads; no certificate, a certificate from another CA (or from one
//! of the same name), an expired one, and a read-only one trying a change are each refused with their
//! gRPC code and one audit record; a connection that does not speak TLS
//! is refused at the handshake and audited too; a client that does not
//! trust the server's CA does not connect. Needs root only for the
//! shared test setup's private bpffs (skipped otherwise).

mod common;
use common::{is_root, my_ids, rt, script, Daemon, Scratch};
use nfkit_daemon::certs::{valid_for, Ca};
use nfkit_daemon::client::{tls_channel, TlsFiles};
use nfkit_daemon::proto::chain_service_client::ChainServiceClient;
use nfkit_daemon::proto::daemon_service_client::DaemonServiceClient;
use nfkit_daemon::proto::{self};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use tonic::Code;

/// A client's certificate and key files.
type Files = (PathBuf, PathBuf);

const REGISTER: &str = "nfkit.v1.ChainService/RegisterChain";

/// Writes a client's files under `dir`: (cert, key).
fn client_files(dir: &Path, name: &str, is: &nfkit_daemon::certs::Issued) -> (PathBuf, PathBuf) {
    let (c, k) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&c, &is.cert_pem).unwrap();
    std::fs::write(&k, &is.key_pem).unwrap();
    (c, k)
}

/// The TCP address nfkitd says it serves on (its log).
fn tcp_addr(d: &Daemon) -> String {
    let t0 = Instant::now();
    loop {
        let log = d.log_text();
        if let Some(l) = log.lines().find(|l| l.contains("serving on tcp:")) {
            let a = l.split("tcp:").nth(1).unwrap();
            return a.split_whitespace().next().unwrap().to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no TCP in: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tls_clients_get_roles_from_certificates_and_every_refusal_is_audited() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-tls");
    let dir = s.dir.join("certs");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new("test CA", valid_for(2)).unwrap();
    let other = Ca::new("other CA", valid_for(2)).unwrap();
    // A CA of the same name as the real one: its signatures do not verify.
    let twin = Ca::new("test CA", valid_for(2)).unwrap();
    let server = ca.server(&[], valid_for(2)).unwrap();
    let ca_pem = dir.join("ca.crt");
    std::fs::write(&ca_pem, ca.issued().cert_pem).unwrap();
    let (srv_c, srv_k) = client_files(&dir, "server", &server);
    let ci = client_files(&dir, "ci", &ca.client("ci", valid_for(2)).unwrap());
    let graf = client_files(&dir, "graf", &ca.client("grafana", valid_for(2)).unwrap());
    let forged = client_files(&dir, "forged", &other.client("ci", valid_for(2)).unwrap());
    let twinned = client_files(&dir, "twinned", &twin.client("ci", valid_for(2)).unwrap());
    let day = Duration::from_secs(86_400);
    let now = SystemTime::now();
    let old = client_files(
        &dir,
        "old",
        &ca.client("ci", now - 3 * day..now - day).unwrap(),
    );
    let (uid, _) = my_ids();
    let d = Daemon::start(
        &s,
        &format!(
            "admin = {{ uids = [{uid}] }}\ndeploy = {{ names = [\"ci\"] }}\n\
             read_only = {{ names = [\"grafana\"] }}"
        ),
        &format!(
            "[tls]\nlisten = \"127.0.0.1:0\"\ncert = {srv_c:?}\nkey = {srv_k:?}\nclient_ca = {ca_pem:?}\n"
        ),
    );
    let addr = tcp_addr(&d);
    let rt = rt();
    let files = |c: Option<&(PathBuf, PathBuf)>| TlsFiles {
        ca: Some(ca_pem.clone()),
        cert: c.map(|c| c.0.clone()),
        key: c.map(|c| c.1.clone()),
    };
    let channel = |c: Option<&(PathBuf, PathBuf)>| {
        rt.block_on(tls_channel(&addr, &files(c)))
            .expect("TLS connection")
    };
    let register = |ch: tonic::transport::Channel, name: &str| {
        rt.block_on(
            ChainServiceClient::new(ch).register_chain(proto::RegisterChainRequest {
                name: name.into(),
                source: script("count_v1.py"),
            }),
        )
    };

    // The deploy role: registers, reads, and is told who it is.
    let ok = register(channel(Some(&ci)), "count").expect("ci registers");
    assert!(ok.into_inner().version.is_some());
    let listed = rt
        .block_on(
            ChainServiceClient::new(channel(Some(&ci)))
                .list_chains(proto::ListChainsRequest::default()),
        )
        .unwrap()
        .into_inner();
    assert!(format!("{listed:?}").contains("\"count\""), "{listed:?}");
    let me = rt
        .block_on(DaemonServiceClient::new(channel(Some(&ci))).get_info(proto::GetInfoRequest {}))
        .unwrap()
        .into_inner()
        .caller
        .unwrap();
    assert_eq!(
        (me.role.as_str(), me.names.clone()),
        ("deploy", vec!["ci".to_string()])
    );
    assert!(me.address.starts_with("127.0.0.1:"), "{me:?}");
    assert_eq!((me.uid, me.pid), (0, 0));

    // Refusals: no certificate, another CA, another CA of the same name,
    // expired, read-only changing.
    let cases: [(Option<&Files>, Code, &str); 5] = [
        (None, Code::Unauthenticated, "no client certificate"),
        (Some(&forged), Code::Unauthenticated, "UnknownIssuer"),
        (Some(&twinned), Code::Unauthenticated, "BadSignature"),
        (Some(&old), Code::Unauthenticated, "expired"),
        (Some(&graf), Code::PermissionDenied, "needs role deploy"),
    ];
    for (c, code, says) in &cases {
        let e = register(channel(*c), "evil").unwrap_err();
        assert_eq!(e.code(), *code, "{e:?}");
        assert!(e.message().contains(says), "{says}: {}", e.message());
    }
    // The read-only client reads.
    assert!(rt
        .block_on(
            ChainServiceClient::new(channel(Some(&graf)))
                .list_chains(proto::ListChainsRequest::default())
        )
        .is_ok());
    // An unauthenticated connection is refused reads as well.
    let e = rt
        .block_on(
            ChainServiceClient::new(channel(Some(&old)))
                .list_chains(proto::ListChainsRequest::default()),
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);

    // Plain HTTP/2 on the TLS port: refused at the handshake.
    let plain = rt.block_on(async {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await?;
        ChainServiceClient::new(ch)
            .list_chains(proto::ListChainsRequest::default())
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    });
    assert!(plain.is_err(), "plain HTTP/2 was served");
    // A client that trusts another CA does not accept the server.
    let other_ca = dir.join("other-ca.crt");
    std::fs::write(&other_ca, other.issued().cert_pem).unwrap();
    let e = rt
        .block_on(tls_channel(
            &addr,
            &TlsFiles {
                ca: Some(other_ca),
                ..files(Some(&ci))
            },
        ))
        .unwrap_err();
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");

    // The audit log: the registration, one record per refusal (with the
    // client's address and why), one for the plain connection, one for
    // the client that hung up on the server's certificate.
    let t0 = Instant::now();
    let audit = loop {
        let a = d.audit_lines();
        let hs = a.iter().filter(|l| l["rpc"] == "tls-handshake").count();
        if hs >= 2 || t0.elapsed() > Duration::from_secs(10) {
            break a;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let regs: Vec<_> = audit.iter().filter(|l| l["rpc"] == REGISTER).collect();
    assert_eq!(regs.len(), 6, "{audit:#?}");
    assert_eq!(regs[0]["result"], "ok");
    assert_eq!(regs[0]["who"]["names"], serde_json::json!(["ci"]));
    assert_eq!(regs[0]["who"]["role"], "deploy");
    for (l, (_, code, says)) in regs[1..].iter().zip(&cases) {
        assert_eq!(l["result"], "refused");
        assert_eq!(l["code"], nfkit_daemon::service::code_name(*code));
        assert!(l["message"].as_str().unwrap().contains(says), "{l}");
        assert!(l["who"]["addr"].as_str().unwrap().starts_with("127.0.0.1:"));
    }
    assert!(regs[2]["who"]["refused"]
        .as_str()
        .unwrap()
        .contains("UnknownIssuer"));
    assert_eq!(regs[5]["who"]["role"], "read-only");
    let lists: Vec<_> = audit
        .iter()
        .filter(|l| l["rpc"] == "nfkit.v1.ChainService/ListChains")
        .collect();
    assert_eq!(lists.len(), 1, "one refused read: {lists:?}");
    let hs: Vec<_> = audit
        .iter()
        .filter(|l| l["rpc"] == "tls-handshake")
        .collect();
    assert_eq!(hs.len(), 2, "{audit:#?}");
    for h in &hs {
        assert_eq!(h["code"], "UNAUTHENTICATED");
        assert!(h["message"]
            .as_str()
            .unwrap()
            .contains("TLS handshake failed"));
    }
    assert!(
        hs.iter()
            .any(|h| h["message"].as_str().unwrap().contains("alert")),
        "{hs:?}"
    );
    assert_eq!(audit.len(), 6 + 1 + 2, "{audit:#?}");
}

#[test]
fn tcp_without_the_tls_files_is_refused_at_start() {
    let e = nfkit_daemon::Config::parse(
        "[tls]\nlisten = \"127.0.0.1:0\"\n",
        Path::new("nfkitd.toml"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("mutual TLS"), "{e}");
}

#[test]
fn daemon_tls_open_connections_keep_their_service_across_a_reload() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-tlsre");
    let dir = s.dir.join("certs");
    let w = nfkit_daemon::certs::write_set(&dir, &[], &["ops".into()], 2).unwrap();
    let (uid, _) = my_ids();
    let d = Daemon::start(
        &s,
        &format!("admin = {{ uids = [{uid}] }}\nread_only = {{ names = [\"ops\"] }}"),
        &format!(
            "[tls]\nlisten = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\ncrl = {:?}\n",
            w.server_cert, w.server_key, w.ca, w.crl
        ),
    );
    let addr = tcp_addr(&d);
    let rt = rt();
    let files = TlsFiles {
        ca: Some(w.ca.clone()),
        cert: Some(w.clients[0].1.clone()),
        key: Some(w.clients[0].2.clone()),
    };
    let info = |ch: &tonic::transport::Channel| {
        rt.block_on(DaemonServiceClient::new(ch.clone()).get_info(proto::GetInfoRequest {}))
    };
    let open = rt.block_on(tls_channel(&addr, &files)).expect("connect");
    assert_eq!(
        info(&open)
            .expect("served")
            .into_inner()
            .caller
            .unwrap()
            .role,
        "read-only"
    );

    // Revoked and reloaded: the open connection is still served, a new
    // handshake is refused with the reason.
    nfkit_daemon::certs::revoke(&dir, "ops", 2).unwrap();
    let r = rt
        .block_on(DaemonServiceClient::new(d.channel(&rt)).reload(proto::ReloadRequest {}))
        .expect("reload")
        .into_inner();
    assert_eq!(r.revoked, 1);
    assert!(r.tls_files.iter().any(|f| f.ends_with("ca.crl")), "{r:?}");
    for _ in 0..3 {
        assert!(info(&open).is_ok(), "the open connection is served on");
    }
    let fresh = rt.block_on(tls_channel(&addr, &files)).expect("connect");
    let st = info(&fresh).expect_err("revoked");
    assert_eq!(st.code(), Code::Unauthenticated);
    assert!(st.message().contains("revoked"), "{st:?}");
    // Reload is for admins: a read-only caller is refused and audited.
    let st = rt
        .block_on(DaemonServiceClient::new(open.clone()).reload(proto::ReloadRequest {}))
        .expect_err("read-only");
    assert_eq!(st.code(), Code::PermissionDenied, "{st:?}");
    let audit = d.audit_lines();
    let reloads: Vec<_> = audit
        .iter()
        .filter(|l| l["rpc"] == "nfkit.v1.DaemonService/Reload")
        .map(|l| l["code"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(reloads, ["OK", "PERMISSION_DENIED"], "{audit:?}");
}
