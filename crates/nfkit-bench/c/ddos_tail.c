/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The DDoS example (examples/ddos.py) as a classic tail-call pipeline:
 * four XDP programs joined by bpf_tail_call through the prog array
 * td_jmp, passing the parsed packet through a per-CPU scratch slot.
 *
 *   td_parse      parse L2/L3/L4 once into td_scratch, tail-call slot 0
 *   td_blacklist  (slot 0) source blacklisted? sample one in 10 of its
 *                 packets to the collector, drop the rest; else slot 1
 *   td_dst        (slot 1) destination token bucket (100/s, burst 20):
 *                 in profile -> PASS; else slot 2
 *   td_pair       (slot 2) (source, destination) bucket (20/s, burst 5):
 *                 empty -> blacklist the source for 10 s and DROP; else PASS
 *
 * A failed tail call drops the packet (the fault action of nfkit's
 * chains). Counters as in the script (PASSED, DROPPED, REDIRECTED).
 * Maps, buckets, sampling and parsing are examples/c/ddos_common.h, shared
 * with examples/c/ddos.c (the same logic as one program), so the two
 * differ only by the tail calls and the scratch slot that carries the
 * parsed packet between programs. Time comes from bpf_ktime_get_ns().
 */
#include "ddos_common.h"

enum { SLOT_BLACKLIST, SLOT_DST, SLOT_PAIR, SLOTS };

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} td_jmp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct flow);
} td_scratch SEC(".maps");

static __always_inline struct flow *td_pkt(void)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(&td_scratch, &k);
}

SEC("xdp") int td_parse(struct xdp_md *ctx)
{
	struct flow *p = td_pkt();

	if (!p)
		return XDP_DROP;
	__builtin_memset(p, 0, sizeof(*p));
	parse(ctx, p);
	bpf_tail_call(ctx, &td_jmp, SLOT_BLACKLIST);
	return XDP_DROP;
}

SEC("xdp") int td_blacklist_stage(struct xdp_md *ctx)
{
	struct flow *p = td_pkt();
	int act;

	if (!p)
		return XDP_DROP;
	act = blacklisted(p, bpf_ktime_get_ns());
	if (act >= 0)
		return act;
	bpf_tail_call(ctx, &td_jmp, SLOT_DST);
	return XDP_DROP;
}

SEC("xdp") int td_dst_stage(struct xdp_md *ctx)
{
	struct flow *p = td_pkt();

	if (!p)
		return XDP_DROP;
	if (take(&dst_buckets, p->dst, DST_RATE, DST_BURST, bpf_ktime_get_ns())) {
		count(PASSED);
		return XDP_PASS;
	}
	bpf_tail_call(ctx, &td_jmp, SLOT_PAIR);
	return XDP_DROP;
}

SEC("xdp") int td_pair_stage(struct xdp_md *ctx)
{
	struct flow *p = td_pkt();

	if (!p)
		return XDP_DROP;
	return pair_step(p, bpf_ktime_get_ns());
}

char _license[] SEC("license") = "GPL";
