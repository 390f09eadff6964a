/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module monitor
 * @hooks xdp tc socket
 * Counters and per-flow timing. A flow is the packet's 5-tuple (addresses,
 * ports, protocol) in one direction; non-IP packets form one flow. Time is
 * nf_now() (pinnable). Shared state is updated with atomics only: per-CPU
 * counters, atomic exchange of timestamps, atomic adds to the average.
 * @const COUNT_EVENTS number of count() slots; event ids at or above COUNT_EVENTS - 1 share the last slot
 * @const LAST_SEEN_NEVER what last_seen() returns for a flow's first packet
 * @map nf_monitor_count per-CPU array of COUNT_EVENTS u64 counters, index = event id
 * @map nf_monitor_rate LRU hash, flow key (40 bytes, the info block's first 40) -> {last_ns, avg_gap_fp, samples}
 * @map nf_monitor_last LRU hash, flow key -> u64 time of the flow's latest packet
 */
#include "nfkit.h"

#define NF_COUNT_EVENTS 256
#define NF_LAST_SEEN_NEVER 0x7fffffffffffffff
#define NF_MONITOR_FLOWS 65536
#define NF_MONITOR_MAX_GAP 1000000000000ULL /* 1000 s: longer gaps count as this */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NF_COUNT_EVENTS);
	__type(key, __u32);
	__type(value, __u64);
} nf_monitor_count SEC(".maps");

/* The flow key: the first NF_FLOW_KEY_SIZE bytes of nf_pkt_info, named
 * so that tools show addresses and ports (docs/abi.md, "Map keys and
 * values"). */
struct nf_monitor_flow_key {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport;
	__u8 l4_proto;
	__u8 ip_version;
	__u16 pad;
};
_Static_assert(sizeof(struct nf_monitor_flow_key) == NF_FLOW_KEY_SIZE, "flow key");

typedef __u64 nf_monitor_last_ns;

struct nf_monitor_rate_val {
	__u64 last_ns;    /* time of the flow's latest packet */
	__u64 avg_gap_fp; /* average gap between packets, ns << 8 */
	__u64 samples;    /* gaps measured so far */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_MONITOR_FLOWS);
	__type(key, struct nf_monitor_flow_key);
	__type(value, struct nf_monitor_rate_val);
} nf_monitor_rate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_MONITOR_FLOWS);
	__type(key, struct nf_monitor_flow_key);
	__type(value, nf_monitor_last_ns);
} nf_monitor_last SEC(".maps");

/**
 * @nf count(event)
 * Count the packet under an event id in a per-CPU counter.
 * @arg event event id, 0..COUNT_EVENTS-2 (254)
 * @returns this CPU's count for the event after the increment (sum
 *          nf_monitor_count over CPUs for the total).
 * @maps nf_monitor_count
 * @bad event >= 255 counts in the shared overflow slot 255 (so a wrong id
 *      shows up there instead of vanishing).
 */
NF(count, event)
{
	__u32 k = event < NF_COUNT_EVENTS - 1 ? (__u32)event : NF_COUNT_EVENTS - 1;
	__u64 *c = bpf_map_lookup_elem(&nf_monitor_count, &k);
	if (!c)
		return NF_FAULT;
	*c += 1;
	return *c;
}
NF_EXPORT(count);

/**
 * @nf flow_rate()
 * Smoothed packet rate of the packet's flow. Each packet measures the gap
 * g (ns) since the flow's previous one (capped at 1000 s, 0 if the clock
 * went back); the average a (ns << 8) starts at the first gap and then
 * moves by (g << 8 - a) / 8 (arithmetic shift) per packet, an exponential
 * average with weight 1/8.
 * @returns packets per second = (10^9 << 8) / a, at most 10^9; 0 for the
 *          flow's first packet.
 * @maps nf_monitor_rate
 * @bad no arguments. Concurrent packets of one flow may both move the
 *      average from the same old value (a slight overshoot, never a torn
 *      value). A full table evicts the least recently used flow.
 */
NF(flow_rate)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_monitor_rate_val *v;
	__u64 now, prev, gap, n;
	__s64 delta;

	if (!pi)
		return NF_FAULT;
	now = nf_now();
	v = bpf_map_lookup_elem(&nf_monitor_rate, pi);
	if (!v) {
		struct nf_monitor_rate_val nv = { .last_ns = now };
		bpf_map_update_elem(&nf_monitor_rate, pi, &nv, BPF_NOEXIST);
		return 0;
	}
	prev = __sync_lock_test_and_set(&v->last_ns, now);
	gap = now > prev ? now - prev : 0;
	if (gap > NF_MONITOR_MAX_GAP)
		gap = NF_MONITOR_MAX_GAP;
	n = __sync_fetch_and_add(&v->samples, 1);
	if (n == 0) {
		v->avg_gap_fp = gap << 8;
	} else {
		delta = ((__s64)(gap << 8) - (__s64)v->avg_gap_fp) >> 3;
		__sync_fetch_and_add(&v->avg_gap_fp, (__u64)delta);
	}
	gap = v->avg_gap_fp;
	if (gap < 256)
		return 1000000000;
	return (1000000000ULL << 8) / gap;
}
NF_EXPORT(flow_rate);

/**
 * @nf last_seen()
 * Time since the previous packet of the packet's flow.
 * @returns nanoseconds since the flow's previous packet (0 if the clock went
 *          back); LAST_SEEN_NEVER (2^63 - 1) for the flow's first packet.
 * @maps nf_monitor_last
 * @bad no arguments. A full table evicts the least recently used flow (its
 *      next packet counts as a first packet).
 */
NF(last_seen)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	__u64 now, prev, *v;

	if (!pi)
		return NF_FAULT;
	now = nf_now();
	v = bpf_map_lookup_elem(&nf_monitor_last, pi);
	if (!v) {
		bpf_map_update_elem(&nf_monitor_last, pi, &now, BPF_NOEXIST);
		return NF_LAST_SEEN_NEVER;
	}
	prev = __sync_lock_test_and_set(v, now);
	return now > prev ? now - prev : 0;
}
NF_EXPORT(last_seen);
