//! TC attachment: tcx links where the kernel has them (Linux 6.6+), else
//! a clsact qdisc with a direct-action cls_bpf filter made through
//! netlink (libbpf's `bpf_tc_*`).
//!
//! * Which one: [`tc_attach_mode`] reads `NFKIT_TC_ATTACH` (`auto`, the
//!   default, `tcx` or `clsact`; forcing `clsact` tests the fallback on
//!   a kernel with tcx), and [`tcx_available`] probes the kernel once:
//!   `BPF_LINK_CREATE` of a sched_cls program with `BPF_TCX_INGRESS` on
//!   ifindex 0 fails with `ENODEV` where tcx exists (the device lookup
//!   comes after the attach type is accepted) and `EINVAL` where it does
//!   not. Nothing is attached by the probe.
//! * A redeploy keeps the kind of attachment it finds recorded (a tcx link
//!   is updated, a filter replaced in place with the same handle and
//!   priority, `NLM_F_REPLACE`: packets see the old or the new program);
//!   asking for the other kind then is an error (undeploy first).
//! * A filter holds its program without any pin; the program is pinned
//!   next to it anyway and the filter's handle, priority and whether
//!   nfkit created the qdisc go into the state file ([`Attach`]).
//! * Undeploy deletes the filter, and the qdisc only if nfkit created it,
//!   no other nfkit deployment on the device still uses it and nobody
//!   else added filters to it since (`tc filter show`).

use crate::deploy::{AttachPoint, Deployment};
use crate::error::KernelError;
use crate::netns::in_netns;
use crate::sys_tc::{self, Point};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// How a deployment is attached, as the state file records it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Attach {
    /// A pinned bpf_link: XDP, or tcx for the TC hooks.
    #[default]
    Link,
    /// A direct-action cls_bpf filter on the device's clsact qdisc.
    Clsact {
        handle: u32,
        priority: u32,
        /// nfkit created the qdisc (so undeploy may remove it).
        qdisc_created: bool,
    },
}

/// What `NFKIT_TC_ATTACH` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcAttachMode {
    /// tcx when [`tcx_available`], else clsact.
    Auto,
    Tcx,
    Clsact,
}

impl TcAttachMode {
    /// Parses `auto`, `tcx` or `clsact`.
    pub fn parse(s: &str) -> Result<TcAttachMode, KernelError> {
        match s {
            "" | "auto" => Ok(TcAttachMode::Auto),
            "tcx" => Ok(TcAttachMode::Tcx),
            "clsact" => Ok(TcAttachMode::Clsact),
            _ => Err(KernelError::BadEnv {
                var: "NFKIT_TC_ATTACH",
                value: s.to_string(),
                expected: "auto, tcx or clsact",
            }),
        }
    }
}

/// The TC attach mode asked for by `NFKIT_TC_ATTACH` (default `auto`).
pub fn tc_attach_mode() -> Result<TcAttachMode, KernelError> {
    TcAttachMode::parse(&std::env::var("NFKIT_TC_ATTACH").unwrap_or_default())
}

/// Does this kernel have tcx links? (Probed once per process.)
pub fn tcx_available() -> bool {
    static TCX: OnceLock<bool> = OnceLock::new();
    *TCX.get_or_init(probe_tcx)
}

fn probe_tcx() -> bool {
    // r0 = -1 (TCX_NEXT); exit
    let insns = [0xffff_ffff_0000_00b7u64, 0x95];
    let load = crate::sys::ProgLoad {
        prog_type: libbpf_sys::BPF_PROG_TYPE_SCHED_CLS,
        expected_attach_type: 0,
        prog_flags: 0,
        name: "nfkit_tcx_probe",
        license: "GPL",
        insns: &insns,
        btf_fd: None,
        func_info: &[],
        line_info: &[],
        log_level: 0,
        log_size: 4096,
    };
    let Ok((prog, _)) = crate::sys::prog_load(&load) else {
        return false;
    };
    use std::os::fd::AsRawFd;
    match crate::sys::link_create(prog.as_raw_fd(), 0, libbpf_sys::BPF_TCX_INGRESS, 0) {
        // Attached to nothing cannot happen with ifindex 0; drop it if so.
        Ok(_) => true,
        Err(e) => e == libc::ENODEV,
    }
}

/// The name of a deployment's kind of attachment: `xdp-link`, `tcx`
/// or `clsact`.
pub fn attach_kind(hook: AttachPoint, attach: &Attach) -> &'static str {
    match attach {
        Attach::Clsact { .. } => "clsact",
        Attach::Link if hook.is_xdp() => "xdp-link",
        Attach::Link => "tcx",
    }
}

fn point(hook: AttachPoint) -> Point {
    if hook == AttachPoint::TcEgress {
        Point::Egress
    } else {
        Point::Ingress
    }
}

/// Should deploying `hook` (over `previous`, if any) go through clsact?
pub(crate) fn use_clsact(
    hook: AttachPoint,
    previous: Option<&Deployment>,
) -> Result<bool, KernelError> {
    if hook.is_xdp() {
        return Ok(false);
    }
    let mode = tc_attach_mode()?;
    if let Some(p) = previous {
        let was = matches!(p.attach, Attach::Clsact { .. });
        let clash = matches!(
            (mode, was),
            (TcAttachMode::Tcx, true) | (TcAttachMode::Clsact, false)
        );
        if clash {
            return Err(KernelError::AttachConflict {
                dev: p.dev.clone(),
                hook,
                current: attach_kind(hook, &p.attach),
                wanted: if was { "tcx" } else { "clsact" },
            });
        }
        return Ok(was);
    }
    Ok(match mode {
        TcAttachMode::Auto => !tcx_available(),
        TcAttachMode::Tcx => false,
        TcAttachMode::Clsact => true,
    })
}

/// A clsact attachment made or replaced by [`attach_clsact`].
pub(crate) struct ClsactOutcome {
    pub attach: Attach,
    pub prog_id: u32,
    /// A filter was there and now runs the new program.
    pub swapped: bool,
}

/// Attaches `prog` at `hook` of `ifindex` (in the calling thread's
/// namespace) through clsact; replaces the filter `previous` recorded.
pub(crate) fn attach_clsact(
    dev: &str,
    ifindex: u32,
    hook: AttachPoint,
    prog: std::os::fd::RawFd,
    previous: Option<&Attach>,
) -> Result<ClsactOutcome, KernelError> {
    let os = |what: String| move |errno| KernelError::Os { what, errno };
    let created = sys_tc::qdisc_create(ifindex).map_err(os(format!("clsact qdisc on {dev}")))?;
    let pt = point(hook);
    let (handle, priority, was_ours) = match previous {
        Some(Attach::Clsact {
            handle,
            priority,
            qdisc_created,
        }) => (*handle, *priority, *qdisc_created),
        _ => (1, 0, false),
    };
    let existed = priority != 0 && sys_tc::filter_query(ifindex, pt, handle, priority).is_ok();
    let f =
        sys_tc::filter_attach(ifindex, pt, prog, handle, priority, priority != 0).map_err(os(
            format!("attach to {dev} ({}) through a clsact filter", hook.name()),
        ))?;
    // The echo of the new filter carries its id; ask when it did not.
    let prog_id = if f.prog_id != 0 {
        f.prog_id
    } else {
        crate::dynamic::prog_id(prog)?
    };
    Ok(ClsactOutcome {
        attach: Attach::Clsact {
            handle: f.handle,
            priority: f.priority,
            qdisc_created: created || was_ours,
        },
        prog_id,
        swapped: existed,
    })
}

/// The program id a clsact deployment's filter runs now (0: gone).
pub(crate) fn clsact_prog_id(d: &Deployment) -> u32 {
    let Attach::Clsact {
        handle, priority, ..
    } = d.attach
    else {
        return 0;
    };
    in_netns(d.netns.as_deref(), || {
        // The device may have been made again with another ifindex.
        let Some(ifindex) = crate::sys::if_nametoindex(&d.dev) else {
            return Ok(0);
        };
        if ifindex != d.ifindex {
            return Ok(0);
        }
        Ok(sys_tc::filter_query(ifindex, point(d.hook), handle, priority).map_or(0, |f| f.prog_id))
    })
    .unwrap_or(0)
}

/// Does `dev` have TC filters at `dir` (`ingress`/`egress`)? Asks `tc`;
/// when it cannot tell, says yes (so the qdisc is kept).
fn has_filters(dev: &str, dir: &str) -> bool {
    std::process::Command::new("tc")
        .args(["filter", "show", "dev", dev, dir])
        .output()
        .map_or(true, |o| {
            !o.status.success() || !String::from_utf8_lossy(&o.stdout).trim().is_empty()
        })
}

/// Undoes the clsact attachments of `gone` (deployments being removed):
/// their filters, then each qdisc nfkit created that no deployment in
/// `kept` uses and that holds no other filter. A device that is gone
/// took its filters and qdisc with it.
pub(crate) fn undeploy_clsact(gone: &[Deployment], kept: &[Deployment]) -> Result<(), KernelError> {
    let same_dev = |a: &Deployment, b: &Deployment| a.dev == b.dev && a.netns == b.netns;
    for (i, d) in gone.iter().enumerate() {
        let Attach::Clsact {
            handle, priority, ..
        } = d.attach
        else {
            continue;
        };
        let clsact = |x: &&Deployment| matches!(x.attach, Attach::Clsact { .. }) && same_dev(x, d);
        // The last of the removed deployments on this device decides
        // about the qdisc, for all of them.
        let later = gone.iter().skip(i + 1).any(|x| clsact(&x));
        let still_used = kept.iter().any(|x| clsact(&x));
        let created = gone.iter().filter(clsact).any(|x| {
            matches!(
                x.attach,
                Attach::Clsact {
                    qdisc_created: true,
                    ..
                }
            )
        });
        in_netns(d.netns.as_deref(), || {
            let Some(ifindex) = crate::sys::if_nametoindex(&d.dev) else {
                return Ok(());
            };
            if ifindex != d.ifindex {
                return Ok(());
            }
            match sys_tc::filter_detach(ifindex, point(d.hook), handle, priority) {
                Ok(()) | Err(libc::ENOENT) | Err(libc::ENODEV) | Err(libc::EINVAL) => {}
                Err(errno) => {
                    return Err(KernelError::Os {
                        what: format!("delete the clsact filter of {} ({})", d.dev, d.hook.name()),
                        errno,
                    })
                }
            }
            if created
                && !later
                && !still_used
                && !has_filters(&d.dev, "ingress")
                && !has_filters(&d.dev, "egress")
            {
                match sys_tc::qdisc_destroy(ifindex) {
                    Ok(()) | Err(libc::ENOENT) | Err(libc::EINVAL) => {}
                    Err(errno) => {
                        return Err(KernelError::Os {
                            what: format!("delete the clsact qdisc of {}", d.dev),
                            errno,
                        })
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_kinds_are_named() {
        assert_eq!(TcAttachMode::parse("").ok(), Some(TcAttachMode::Auto));
        assert_eq!(TcAttachMode::parse("tcx").ok(), Some(TcAttachMode::Tcx));
        assert_eq!(
            TcAttachMode::parse("clsact").ok(),
            Some(TcAttachMode::Clsact)
        );
        assert!(TcAttachMode::parse("qdisc").is_err());
        assert_eq!(attach_kind(AttachPoint::Xdp, &Attach::Link), "xdp-link");
        assert_eq!(attach_kind(AttachPoint::TcEgress, &Attach::Link), "tcx");
        let c = Attach::Clsact {
            handle: 1,
            priority: 49152,
            qdisc_created: true,
        };
        assert_eq!(attach_kind(AttachPoint::TcIngress, &c), "clsact");
        let j = serde_json::to_string(&c).unwrap_or_default();
        assert!(j.contains("\"kind\":\"clsact\""), "{j}");
        let back: Attach = serde_json::from_str(&j).unwrap_or_default();
        assert_eq!(back, c);
    }
}
