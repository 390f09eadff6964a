//! nfkitd's API without the kernel: chains (register, versions,
//! digests, check with diagnostics), daemon info, roles from peer
//! credentials, the audit log. Needs root only for the private bpffs of
//! the shared test setup (skipped otherwise).

mod common;
use common::{is_root, my_ids, rt, script, Daemon, Scratch};
use nfkit_daemon::proto::chain_service_client::ChainServiceClient;
use nfkit_daemon::proto::daemon_service_client::DaemonServiceClient;
use nfkit_daemon::proto::{self, script_source::Kind};
use tonic::Code;

fn inline(file: &str, source: &str) -> Option<proto::ScriptSource> {
    Some(proto::ScriptSource {
        kind: Some(Kind::Inline(proto::InlineScript {
            file: file.into(),
            source: source.into(),
            source_path: String::new(),
        })),
    })
}

#[test]
fn chains_get_versions_with_digests_and_checks_give_diagnostics() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-api-chains");
    let (uid, _) = my_ids();
    let d = Daemon::start(&s, &format!("admin = {{ uids = [{uid}] }}"), "");
    let rt = rt();
    let mut c = ChainServiceClient::new(d.channel(&rt));
    let reg = |c: &mut ChainServiceClient<_>, name: &str, src: String| {
        rt.block_on(c.register_chain(proto::RegisterChainRequest {
            name: name.into(),
            source: src,
        }))
    };
    let v1 = reg(&mut c, "count", script("count_v1.py"))
        .unwrap()
        .into_inner();
    let ver = v1.version.unwrap();
    assert_eq!((ver.version, v1.unchanged), (1, false));
    assert_eq!(
        ver.digest,
        nfkit_daemon::files::digest(script("count_v1.py").as_bytes())
    );
    assert!(v1.check.unwrap().chains.iter().any(|c| c == "count"));
    let v2 = reg(&mut c, "count", script("count_v2.py"))
        .unwrap()
        .into_inner();
    assert_eq!(v2.version.unwrap().version, 2);
    let again = reg(&mut c, "count", script("count_v1.py"))
        .unwrap()
        .into_inner();
    assert_eq!((again.version.unwrap().version, again.unchanged), (1, true));
    // A script with errors is refused with its diagnostics, not stored.
    let e = reg(&mut c, "count", script("broken.py")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("no_such_nf"), "{}", e.message());
    let list = rt
        .block_on(c.list_chains(proto::ListChainsRequest::default()))
        .unwrap()
        .into_inner();
    assert_eq!(list.versions.len(), 2);
    let got = rt
        .block_on(c.get_chain(proto::GetChainRequest {
            chain: Some(proto::ChainRef {
                name: "count".into(),
                version: 0,
            }),
        }))
        .unwrap()
        .into_inner();
    assert_eq!(got.source, script("count_v2.py"));
    let chk = rt
        .block_on(c.check_chain(proto::CheckChainRequest {
            script: inline("broken.py", &script("broken.py")),
            attach: 0,
        }))
        .unwrap()
        .into_inner();
    assert!(!chk.ok);
    let dg = &chk.diagnostics[0];
    assert_eq!(
        (dg.severity.as_str(), dg.file.as_str(), dg.line),
        ("error", "broken.py", 4)
    );
    assert!(chk.rendered.contains("broken.py:4:"), "{}", chk.rendered);
    // Registrations are audited with their digests.
    let audit = d.audit_lines();
    let regs: Vec<_> = audit
        .iter()
        .filter(|l| l["rpc"] == "nfkit.v1.ChainService/RegisterChain")
        .collect();
    assert_eq!(regs.len(), 4);
    assert_eq!(regs[0]["digest"], ver.digest);
    assert_eq!(regs[0]["who"]["uid"], uid);
    assert_eq!(regs[3]["result"], "refused");
}

#[test]
fn roles_come_from_peer_credentials_and_refusals_are_audited() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("dmn-api-roles");
    let (uid, gid) = my_ids();
    // This process is only read-only here.
    let d = Daemon::start(
        &s,
        &format!("admin = {{ uids = [] }}\nread_only = {{ uids = [{uid}] }}"),
        "",
    );
    let rt = rt();
    let mut info = DaemonServiceClient::new(d.channel(&rt));
    let i = rt
        .block_on(info.get_info(proto::GetInfoRequest {}))
        .unwrap()
        .into_inner();
    let caller = i.caller.unwrap();
    assert_eq!((caller.uid, caller.gid), (uid, gid));
    assert_eq!(caller.pid as u32, std::process::id());
    assert_eq!(caller.role, "read-only");
    let e = rt
        .block_on(info.shutdown(proto::ShutdownRequest {}))
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(e.message().contains("needs role admin"), "{}", e.message());
    let mut c = ChainServiceClient::new(d.channel(&rt));
    let e = rt
        .block_on(c.register_chain(proto::RegisterChainRequest {
            name: "x".into(),
            source: script("count_v1.py"),
        }))
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    // Reads are allowed and not audited; the two refusals are.
    assert!(rt
        .block_on(c.list_chains(proto::ListChainsRequest::default()))
        .is_ok());
    let audit = d.audit_lines();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(audit.iter().all(|l| l["result"] == "refused"
        && l["code"] == "PERMISSION_DENIED"
        && l["who"]["role"] == "read-only"));
}
