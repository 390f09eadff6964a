//! Program types from ELF section names, following libbpf's conventions
//! (`xdp`, `xdp.frags`, `tc`, `classifier`, `tcx/ingress`, `socket`,
//! `kprobe/...`, ...).

use crate::image::ProgType;

/// A section-name rule: `Exact` matches the name only; `Prefix` matches
/// the name or the name followed by `/...`; `Slash` requires `/...`.
enum Rule {
    Exact(&'static str),
    Prefix(&'static str),
    Slash(&'static str),
}

use Rule::*;

const RULES: &[(Rule, ProgType)] = &[
    (Exact("socket"), ProgType::SocketFilter),
    (Prefix("sk_reuseport/migrate"), ProgType::SkReuseport),
    (Prefix("sk_reuseport"), ProgType::SkReuseport),
    (Prefix("kprobe"), ProgType::Kprobe),
    (Prefix("uprobe"), ProgType::Kprobe),
    (Prefix("uprobe.s"), ProgType::Kprobe),
    (Prefix("kretprobe"), ProgType::Kprobe),
    (Prefix("uretprobe"), ProgType::Kprobe),
    (Prefix("uretprobe.s"), ProgType::Kprobe),
    (Prefix("kprobe.multi"), ProgType::Kprobe),
    (Prefix("kretprobe.multi"), ProgType::Kprobe),
    (Prefix("uprobe.multi"), ProgType::Kprobe),
    (Prefix("uretprobe.multi"), ProgType::Kprobe),
    (Prefix("ksyscall"), ProgType::Kprobe),
    (Prefix("kretsyscall"), ProgType::Kprobe),
    (Prefix("usdt"), ProgType::Kprobe),
    (Prefix("tc"), ProgType::SchedCls),
    (Prefix("tcx"), ProgType::SchedCls),
    (Prefix("netkit"), ProgType::SchedCls),
    (Prefix("classifier"), ProgType::SchedCls),
    (Prefix("action"), ProgType::SchedAct),
    (Prefix("tracepoint"), ProgType::Tracepoint),
    (Prefix("tp"), ProgType::Tracepoint),
    (Prefix("raw_tracepoint"), ProgType::RawTracepoint),
    (Prefix("raw_tp"), ProgType::RawTracepoint),
    (Prefix("raw_tracepoint.w"), ProgType::RawTracepointWritable),
    (Prefix("raw_tp.w"), ProgType::RawTracepointWritable),
    (Slash("tp_btf"), ProgType::Tracing),
    (Slash("fentry"), ProgType::Tracing),
    (Slash("fmod_ret"), ProgType::Tracing),
    (Slash("fexit"), ProgType::Tracing),
    (Slash("fentry.s"), ProgType::Tracing),
    (Slash("fmod_ret.s"), ProgType::Tracing),
    (Slash("fexit.s"), ProgType::Tracing),
    (Slash("iter"), ProgType::Tracing),
    (Slash("iter.s"), ProgType::Tracing),
    (Slash("freplace"), ProgType::Ext),
    (Slash("lsm"), ProgType::Lsm),
    (Slash("lsm.s"), ProgType::Lsm),
    (Slash("lsm_cgroup"), ProgType::Lsm),
    (Prefix("struct_ops"), ProgType::StructOps),
    (Prefix("struct_ops.s"), ProgType::StructOps),
    (Exact("sk_lookup"), ProgType::SkLookup),
    (Exact("syscall"), ProgType::Syscall),
    (Prefix("xdp.frags"), ProgType::Xdp),
    (Prefix("xdp"), ProgType::Xdp),
    (Exact("perf_event"), ProgType::PerfEvent),
    (Exact("lwt_in"), ProgType::LwtIn),
    (Exact("lwt_out"), ProgType::LwtOut),
    (Exact("lwt_xmit"), ProgType::LwtXmit),
    (Exact("lwt_seg6local"), ProgType::LwtSeg6local),
    (Exact("sockops"), ProgType::SockOps),
    (Prefix("sk_skb"), ProgType::SkSkb),
    (Exact("sk_msg"), ProgType::SkMsg),
    (Exact("lirc_mode2"), ProgType::LircMode2),
    (Exact("flow_dissector"), ProgType::FlowDissector),
    (Prefix("cgroup_skb"), ProgType::CgroupSkb),
    (Exact("cgroup/skb"), ProgType::CgroupSkb),
    (Exact("cgroup/sock_create"), ProgType::CgroupSock),
    (Exact("cgroup/sock_release"), ProgType::CgroupSock),
    (Exact("cgroup/sock"), ProgType::CgroupSock),
    (Exact("cgroup/post_bind4"), ProgType::CgroupSock),
    (Exact("cgroup/post_bind6"), ProgType::CgroupSock),
    (Exact("cgroup/dev"), ProgType::CgroupDevice),
    (Exact("cgroup/bind4"), ProgType::CgroupSockAddr),
    (Exact("cgroup/bind6"), ProgType::CgroupSockAddr),
    (Exact("cgroup/connect4"), ProgType::CgroupSockAddr),
    (Exact("cgroup/connect6"), ProgType::CgroupSockAddr),
    (Exact("cgroup/connect_unix"), ProgType::CgroupSockAddr),
    (Exact("cgroup/sendmsg4"), ProgType::CgroupSockAddr),
    (Exact("cgroup/sendmsg6"), ProgType::CgroupSockAddr),
    (Exact("cgroup/sendmsg_unix"), ProgType::CgroupSockAddr),
    (Exact("cgroup/recvmsg4"), ProgType::CgroupSockAddr),
    (Exact("cgroup/recvmsg6"), ProgType::CgroupSockAddr),
    (Exact("cgroup/recvmsg_unix"), ProgType::CgroupSockAddr),
    (Exact("cgroup/getpeername4"), ProgType::CgroupSockAddr),
    (Exact("cgroup/getpeername6"), ProgType::CgroupSockAddr),
    (Exact("cgroup/getpeername_unix"), ProgType::CgroupSockAddr),
    (Exact("cgroup/getsockname4"), ProgType::CgroupSockAddr),
    (Exact("cgroup/getsockname6"), ProgType::CgroupSockAddr),
    (Exact("cgroup/getsockname_unix"), ProgType::CgroupSockAddr),
    (Exact("cgroup/sysctl"), ProgType::CgroupSysctl),
    (Exact("cgroup/getsockopt"), ProgType::CgroupSockopt),
    (Exact("cgroup/setsockopt"), ProgType::CgroupSockopt),
    (Exact("netfilter"), ProgType::Netfilter),
];

/// The program type of a code section, or `None` when the name follows
/// no known convention.
pub fn prog_type_of_section(section: &str) -> Option<ProgType> {
    let mut best: Option<(usize, ProgType)> = None;
    for (rule, ty) in RULES {
        let (pat, ok) = match rule {
            Exact(p) => (*p, section == *p),
            Prefix(p) => (
                *p,
                section == *p
                    || section
                        .strip_prefix(p)
                        .is_some_and(|rest| rest.starts_with('/')),
            ),
            Slash(p) => (
                *p,
                section
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1),
            ),
        };
        if ok && best.is_none_or(|(len, _)| pat.len() > len) {
            best = Some((pat.len(), *ty));
        }
    }
    best.map(|(_, t)| t)
}

/// The conventional section for entry programs of type `t` (what the ELF
/// writer uses when an entry has no section name).
pub fn default_section(t: ProgType) -> String {
    match t {
        ProgType::SocketFilter => "socket".into(),
        ProgType::SchedCls => "tc".into(),
        ProgType::SchedAct => "action".into(),
        ProgType::Xdp => "xdp".into(),
        ProgType::CgroupSkb => "cgroup_skb/ingress".into(),
        ProgType::SkSkb => "sk_skb".into(),
        ProgType::SkMsg => "sk_msg".into(),
        ProgType::SockOps => "sockops".into(),
        ProgType::FlowDissector => "flow_dissector".into(),
        ProgType::SkLookup => "sk_lookup".into(),
        ProgType::Syscall => "syscall".into(),
        ProgType::Netfilter => "netfilter".into(),
        ProgType::LwtIn => "lwt_in".into(),
        ProgType::LwtOut => "lwt_out".into(),
        ProgType::LwtXmit => "lwt_xmit".into(),
        ProgType::LwtSeg6local => "lwt_seg6local".into(),
        ProgType::PerfEvent => "perf_event".into(),
        other => other.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libbpf_section_names() {
        let cases = [
            ("xdp", Some(ProgType::Xdp)),
            ("xdp.frags", Some(ProgType::Xdp)),
            ("xdp/devmap", Some(ProgType::Xdp)),
            ("xdpfoo", None),
            ("tc", Some(ProgType::SchedCls)),
            ("classifier", Some(ProgType::SchedCls)),
            ("tcx/ingress", Some(ProgType::SchedCls)),
            ("tc/egress", Some(ProgType::SchedCls)),
            ("socket", Some(ProgType::SocketFilter)),
            ("socket/foo", None),
            ("sk_skb/stream_verdict", Some(ProgType::SkSkb)),
            ("tracepoint/net/net_dev_xmit", Some(ProgType::Tracepoint)),
            ("kprobe/do_sys_open", Some(ProgType::Kprobe)),
            ("kretprobe/x", Some(ProgType::Kprobe)),
            ("cgroup_skb/ingress", Some(ProgType::CgroupSkb)),
            ("sk_msg", Some(ProgType::SkMsg)),
            ("raw_tp.w/foo", Some(ProgType::RawTracepointWritable)),
            ("raw_tp/foo", Some(ProgType::RawTracepoint)),
            ("fentry/foo", Some(ProgType::Tracing)),
            ("fentry", None),
            ("cgroup/connect4", Some(ProgType::CgroupSockAddr)),
            (".text", None),
        ];
        for (name, want) in cases {
            assert_eq!(prog_type_of_section(name), want, "{name}");
        }
    }

    #[test]
    fn default_sections_map_back() {
        for t in [
            ProgType::Xdp,
            ProgType::SchedCls,
            ProgType::SocketFilter,
            ProgType::SkSkb,
            ProgType::CgroupSkb,
        ] {
            assert_eq!(prog_type_of_section(&default_section(t)), Some(t));
        }
    }
}
