//! TC deployments through the clsact fallback (forced with
//! `NFKIT_TC_ATTACH=clsact`, since this kernel has tcx): a filter on a
//! clsact qdisc that nfkit creates, recorded and reported by `status`,
//! replaced in place on redeploy (same handle and priority, new
//! program), and undeploy removes the filter and the qdisc only when
//! nfkit made it. Also: the tcx probe, and `auto` picking tcx here.
//! Needs root (skipped otherwise); each test has its own namespace,
//! veth pair and private bpffs mount, removed by RAII guards.

mod common;
use common::{is_root, tc, Scratch};
use nfkit_kernel::deploy::{self, AttachPoint as Hook, DeployRequest, Paths};
use nfkit_kernel::tc::{self, Attach};
use nfkit_kernel::testbed::{Netns, Veth};
use nfkit_object::Image;
use std::process::Command;

/// The catalogue's `nf.base` built for TC (standalone `tc_drop`, `tc_allow`).
fn base_tc() -> Image {
    let obj = nfkit_nf::catalogue::object("base", nfkit_nf::Hook::Tc).expect("nf.base for tc");
    Image::from_elf(obj, "base.tc.o").expect("image")
}

/// Deploys `entry` of `image` on `dev` in `ns` (from a thread that
/// enters the namespace, as `nfkit deploy --netns` does).
fn deploy_in(
    paths: &Paths,
    image: &Image,
    entry: &str,
    ns: &Netns,
    dev: &str,
    hook: Hook,
) -> Result<deploy::DeployOutcome, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let req = DeployRequest {
                image,
                entry,
                map_writes: &[],
                dev,
                netns: Some(ns.name()),
                hook,
                source: "base.tc.o",
                dynamic: None,
                chains: &[],
                map_descs: &[],
                post_of: None,
            };
            deploy::deploy(paths, &req).map_err(|e| e.to_string())
        })
        .join()
        .unwrap_or_else(|_| Err("deploy thread panicked".into()))
    })
}

/// Sets `NFKIT_TC_ATTACH` for this process (every test of this file
/// wants the same value).
fn force_clsact() {
    std::env::set_var("NFKIT_TC_ATTACH", "clsact");
}

#[test]
fn tcx_probe_finds_tcx_on_this_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // Linux 6.6+ has tcx; the probe must say so without attaching anything.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release
        .trim()
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    assert_eq!(tc::tcx_available(), (major, minor) >= (6, 6), "{release}");
}

#[test]
fn clsact_deploy_status_replace_undeploy() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    force_clsact();
    let s = Scratch::new("kclsact");
    let paths = s.paths();
    let sut = Netns::new("sut").expect("netns");
    let peer = Netns::new("peer").expect("netns");
    let veth = Veth::new(
        Some(&sut),
        Some("198.18.40.1/24"),
        Some(&peer),
        Some("198.18.40.2/24"),
    )
    .expect("veth");
    let dev = veth.a.dev.as_str();
    let image = base_tc();

    let d1 = deploy_in(&paths, &image, "tc_drop", &sut, dev, Hook::TcIngress).expect("deploy");
    assert!(!d1.swapped);
    let Attach::Clsact {
        handle,
        priority,
        qdisc_created,
    } = d1.deployment.attach
    else {
        panic!("not clsact: {:?}", d1.deployment.attach);
    };
    assert!(qdisc_created && handle != 0 && priority != 0);
    assert_eq!(d1.deployment.link_id, 0);
    let qd = tc(&sut, &["qdisc", "show", "dev", dev]);
    assert!(qd.contains("clsact"), "{qd}");
    let f = tc(&sut, &["filter", "show", "dev", dev, "ingress"]);
    assert!(
        f.contains(&format!("id {}", d1.deployment.prog_id)) && f.contains("direct-action"),
        "{f}"
    );
    // No tcx link was made.
    let links = sut.ip(&["link", "show", "dev", dev]).expect("ip link");
    assert!(!links.contains("tcx"), "{links}");

    // status (from inside the namespace, as `nfkit status` would run).
    let st = std::thread::scope(|sc| {
        sc.spawn(|| {
            deploy::enter_netns(sut.name()).expect("enter");
            deploy::status(&paths).expect("status")
        })
        .join()
        .expect("status thread")
    });
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].attach_kind, "clsact");
    assert!(st[0].attached);
    assert_eq!(st[0].live_prog_id, d1.deployment.prog_id);
    let json = serde_json::to_value(&st[0]).expect("json");
    assert_eq!(json["attach"]["kind"], "clsact", "{json}");
    assert_eq!(json["attach_kind"], "clsact", "{json}");

    // Redeploy: the same filter (handle, priority) now runs the new program.
    let d2 = deploy_in(&paths, &image, "tc_allow", &sut, dev, Hook::TcIngress).expect("redeploy");
    assert!(d2.swapped);
    assert_eq!(d2.deployment.attach, d1.deployment.attach);
    assert_ne!(d2.deployment.prog_id, d1.deployment.prog_id);
    let f = tc(&sut, &["filter", "show", "dev", dev, "ingress"]);
    assert!(f.contains(&format!("id {}", d2.deployment.prog_id)), "{f}");
    assert!(
        !f.contains(&format!("id {} ", d1.deployment.prog_id)),
        "{f}"
    );
    assert_eq!(f.matches("direct-action").count(), 1, "one filter: {f}");

    // The other direction shares the qdisc nfkit made.
    let e = deploy_in(&paths, &image, "tc_allow", &sut, dev, Hook::TcEgress).expect("egress");
    assert!(matches!(
        e.deployment.attach,
        Attach::Clsact {
            qdisc_created: false,
            ..
        }
    ));
    // Asking for tcx over a clsact deployment is refused.
    std::env::set_var("NFKIT_TC_ATTACH", "tcx");
    let err = deploy_in(&paths, &image, "tc_allow", &sut, dev, Hook::TcIngress);
    force_clsact();
    assert!(
        err.as_ref().is_err_and(|e| e.contains("undeploy")),
        "{err:?}"
    );

    let gone = deploy::undeploy(&paths, Some(dev)).expect("undeploy");
    assert_eq!(gone.len(), 2);
    let f = tc(&sut, &["filter", "show", "dev", dev, "ingress"]);
    assert!(f.trim().is_empty(), "{f}");
    let qd = tc(&sut, &["qdisc", "show", "dev", dev]);
    assert!(!qd.contains("clsact"), "qdisc nfkit made is left: {qd}");
}

#[test]
fn clsact_undeploy_keeps_a_qdisc_nfkit_did_not_make() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    force_clsact();
    let s = Scratch::new("kclsact2");
    let paths = s.paths();
    let sut = Netns::new("sut").expect("netns");
    let veth = Veth::new(Some(&sut), Some("198.18.41.1/24"), None, None).expect("veth");
    let dev = veth.a.dev.as_str();
    let out = Command::new("tc")
        .args(["-n", sut.name(), "qdisc", "add", "dev", dev, "clsact"])
        .status()
        .expect("tc");
    assert!(out.success());
    let image = base_tc();
    let d = deploy_in(&paths, &image, "tc_allow", &sut, dev, Hook::TcEgress).expect("deploy");
    assert!(matches!(
        d.deployment.attach,
        Attach::Clsact {
            qdisc_created: false,
            ..
        }
    ));
    deploy::undeploy(&paths, None).expect("undeploy");
    let f = tc(&sut, &["filter", "show", "dev", dev, "egress"]);
    assert!(f.trim().is_empty(), "{f}");
    let qd = tc(&sut, &["qdisc", "show", "dev", dev]);
    assert!(
        qd.contains("clsact"),
        "someone else's qdisc was removed: {qd}"
    );
}
