//! Which helpers exist, per profile, with the kernel's numbering, the
//! number of arguments they read, and the program types that may call
//! them.

#![forbid(unsafe_code)]

use crate::config::Profile;
use nfkit_object::ProgType;

/// Helper ids (kernel numbering, `__BPF_FUNC_MAPPER` in `linux/bpf.h`).
pub mod id {
    pub use nfkit_abi::helpers::*;
    /// The conformance suite's "unwind" helper (same number as ktime_get_ns).
    pub const UNWIND: i32 = 5;
}

/// Which program types may call a helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Avail {
    /// Every program type.
    Base,
    /// XDP only.
    Xdp,
    /// TC (sched_cls / sched_act) only.
    Tc,
    /// XDP and TC.
    XdpTc,
    /// Socket filters and TC (programs with a socket buffer).
    Skb,
    /// XDP, TC and socket filters (every program with a packet).
    Packet,
}

impl Avail {
    /// True if a program of type `t` may call the helper.
    pub fn allows(self, t: ProgType) -> bool {
        let tc = matches!(t, ProgType::SchedCls | ProgType::SchedAct);
        match self {
            Avail::Base => true,
            Avail::Xdp => t == ProgType::Xdp,
            Avail::Tc => tc,
            Avail::XdpTc => tc || t == ProgType::Xdp,
            Avail::Skb => tc || t == ProgType::SocketFilter,
            Avail::Packet => tc || matches!(t, ProgType::Xdp | ProgType::SocketFilter),
        }
    }
}

/// What the VM knows of one helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperInfo {
    pub id: i32,
    pub name: &'static str,
    /// Number of argument registers (r1..) the helper reads.
    pub args: u8,
    pub avail: Avail,
}

const fn h(id: i32, name: &'static str, args: u8, avail: Avail) -> HelperInfo {
    HelperInfo {
        id,
        name,
        args,
        avail,
    }
}

/// The kernel profile's helpers.
pub const KERNEL_HELPERS: &[HelperInfo] = &[
    h(id::MAP_LOOKUP_ELEM, "map_lookup_elem", 2, Avail::Base),
    h(id::MAP_UPDATE_ELEM, "map_update_elem", 4, Avail::Base),
    h(id::MAP_DELETE_ELEM, "map_delete_elem", 2, Avail::Base),
    h(id::KTIME_GET_NS, "ktime_get_ns", 0, Avail::Base),
    h(id::TRACE_PRINTK, "trace_printk", 2, Avail::Base),
    h(id::GET_PRANDOM_U32, "get_prandom_u32", 0, Avail::Base),
    h(
        id::GET_SMP_PROCESSOR_ID,
        "get_smp_processor_id",
        0,
        Avail::Base,
    ),
    h(id::SKB_STORE_BYTES, "skb_store_bytes", 5, Avail::Tc),
    h(id::L3_CSUM_REPLACE, "l3_csum_replace", 5, Avail::Tc),
    h(id::L4_CSUM_REPLACE, "l4_csum_replace", 5, Avail::Tc),
    h(id::TAIL_CALL, "tail_call", 3, Avail::Base),
    h(id::SKB_GET_TUNNEL_KEY, "skb_get_tunnel_key", 4, Avail::Tc),
    h(id::SKB_SET_TUNNEL_KEY, "skb_set_tunnel_key", 4, Avail::Tc),
    h(id::REDIRECT, "redirect", 2, Avail::XdpTc),
    h(id::PERF_EVENT_OUTPUT, "perf_event_output", 5, Avail::Packet),
    h(id::SKB_CHANGE_PROTO, "skb_change_proto", 3, Avail::Tc),
    h(id::SKB_ADJUST_ROOM, "skb_adjust_room", 4, Avail::Tc),
    h(id::FIB_LOOKUP, "fib_lookup", 4, Avail::XdpTc),
    h(id::SKB_ECN_SET_CE, "skb_ecn_set_ce", 1, Avail::Tc),
    h(id::SKB_GET_TUNNEL_OPT, "skb_get_tunnel_opt", 3, Avail::Tc),
    h(id::SKB_SET_TUNNEL_OPT, "skb_set_tunnel_opt", 3, Avail::Tc),
    h(id::STRTOL, "strtol", 4, Avail::Base),
    h(id::STRTOUL, "strtoul", 4, Avail::Base),
    h(id::STRNCMP, "strncmp", 3, Avail::Base),
    h(id::SKB_SET_TSTAMP, "skb_set_tstamp", 3, Avail::Tc),
    h(id::CHECK_MTU, "check_mtu", 5, Avail::XdpTc),
    h(id::CSUM_LEVEL, "csum_level", 2, Avail::Tc),
    h(id::SKB_VLAN_PUSH, "skb_vlan_push", 3, Avail::Tc),
    h(id::SKB_VLAN_POP, "skb_vlan_pop", 1, Avail::Tc),
    h(id::SKB_CHANGE_TYPE, "skb_change_type", 2, Avail::Tc),
    h(id::SKB_CHANGE_HEAD, "skb_change_head", 3, Avail::Tc),
    h(id::SKB_CHANGE_TAIL, "skb_change_tail", 3, Avail::Tc),
    h(id::CSUM_UPDATE, "csum_update", 2, Avail::Tc),
    h(id::CLONE_REDIRECT, "clone_redirect", 3, Avail::Tc),
    h(id::SET_HASH_INVALID, "set_hash_invalid", 1, Avail::Tc),
    h(id::SET_HASH, "set_hash", 2, Avail::Tc),
    h(id::SKB_LOAD_BYTES, "skb_load_bytes", 4, Avail::Skb),
    h(id::CSUM_DIFF, "csum_diff", 5, Avail::XdpTc),
    h(
        id::SKB_LOAD_BYTES_RELATIVE,
        "skb_load_bytes_relative",
        5,
        Avail::Skb,
    ),
    h(id::GET_HASH_RECALC, "get_hash_recalc", 1, Avail::Tc),
    h(id::SKB_PULL_DATA, "skb_pull_data", 2, Avail::Tc),
    h(id::GET_NUMA_NODE_ID, "get_numa_node_id", 0, Avail::Base),
    h(id::XDP_ADJUST_HEAD, "xdp_adjust_head", 2, Avail::Xdp),
    h(id::REDIRECT_MAP, "redirect_map", 3, Avail::Xdp),
    h(id::XDP_ADJUST_META, "xdp_adjust_meta", 2, Avail::Xdp),
    h(id::XDP_ADJUST_TAIL, "xdp_adjust_tail", 2, Avail::Xdp),
    h(id::SPIN_LOCK, "spin_lock", 1, Avail::Base),
    h(id::SPIN_UNLOCK, "spin_unlock", 1, Avail::Base),
    h(id::JIFFIES64, "jiffies64", 0, Avail::Base),
    h(id::KTIME_GET_BOOT_NS, "ktime_get_boot_ns", 0, Avail::Base),
    h(id::RINGBUF_OUTPUT, "ringbuf_output", 4, Avail::Base),
    h(id::RINGBUF_RESERVE, "ringbuf_reserve", 3, Avail::Base),
    h(id::RINGBUF_SUBMIT, "ringbuf_submit", 2, Avail::Base),
    h(id::RINGBUF_DISCARD, "ringbuf_discard", 2, Avail::Base),
    h(id::RINGBUF_QUERY, "ringbuf_query", 2, Avail::Base),
    h(
        id::KTIME_GET_COARSE_NS,
        "ktime_get_coarse_ns",
        0,
        Avail::Base,
    ),
    h(id::LOOP, "loop", 4, Avail::Base),
    h(id::XDP_GET_BUFF_LEN, "xdp_get_buff_len", 1, Avail::Xdp),
    h(id::XDP_LOAD_BYTES, "xdp_load_bytes", 4, Avail::Xdp),
    h(id::XDP_STORE_BYTES, "xdp_store_bytes", 4, Avail::Xdp),
    h(
        id::MAP_LOOKUP_PERCPU_ELEM,
        "map_lookup_percpu_elem",
        3,
        Avail::Base,
    ),
];

/// The conformance profile's helpers.
pub const CONFORMANCE_HELPERS: &[HelperInfo] = &[h(id::UNWIND, "unwind", 1, Avail::Base)];

/// The helper `id` of `profile`, if it has one.
pub fn lookup(profile: Profile, id: i64) -> Option<&'static HelperInfo> {
    let table = match profile {
        Profile::Kernel => KERNEL_HELPERS,
        Profile::Conformance => CONFORMANCE_HELPERS,
    };
    table.iter().find(|h| h.id as i64 == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_ids_match_the_isa_names() {
        for h in KERNEL_HELPERS {
            assert_eq!(
                nfkit_isa::helpers::helper_id(h.name),
                Some(h.id),
                "helper {}",
                h.name
            );
        }
    }
}
