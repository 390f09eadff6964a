/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * examples/flow_limiter.py written by hand as one ordinary XDP program
 * (the baseline of `make bench`).
 *
 * Same logic: IPv4 packets with an L4 header are limited per flow (source
 * address and both ports) by a token bucket of BURST tokens counted in
 * thousandths, refilled RATE tokens per second by the time since the
 * previous packet of the packet's 5-tuple (addresses, ports, protocol);
 * the first packet of a 5-tuple finds a full bucket. Other packets pass.
 * Ports are those of a complete TCP (20 bytes), UDP or SCTP (8 bytes)
 * header, else 0; "an L4 header" is any L4 header of a first fragment
 * (TCP, UDP and SCTP only when complete), as nfkit's parser has it.
 *
 * Time: like nf_now(), the `now_ns` of map nfkit_config (same layout as
 * nfkit's struct nf_config) when `clock_pinned` is set, else the kernel's
 * (hand_common.h).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "hand_common.h"

#define RATE 10
#define BURST 4
#define SCALE 1000
#define FULL (BURST * SCALE)
#define NS_PER_UNIT (1000000000 / (RATE * SCALE))

struct five_tuple {
	__be32 src;
	__be32 dst;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* 5-tuple -> time of its latest packet. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct five_tuple);
	__type(value, __u64);
} last_seen SEC(".maps");

/* (source << 32 | sport << 16 | dport) -> tokens (thousandths). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} tokens SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} verdicts SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&verdicts, &what);
	if (c)
		__sync_fetch_and_add(c, 1);
}

SEC("xdp") int flow_limiter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct five_tuple ft = {};
	__u64 now, gap, flow, t, refill, *v;
	void *l4h;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->version != 4 || ip->ihl < 5 || (ip->frag_off & bpf_htons(0x1fff)))
		return XDP_PASS;
	l4h = (void *)ip + ip->ihl * 4;
	ft.src = ip->saddr;
	ft.dst = ip->daddr;
	ft.proto = ip->protocol;
	if (ft.proto == IPPROTO_TCP || ft.proto == IPPROTO_UDP || ft.proto == IPPROTO_SCTP) {
		__be16 *ports = l4h;
		if (l4h + (ft.proto == IPPROTO_TCP ? 20 : 8) > end)
			return XDP_PASS; /* truncated: no L4 header */
		ft.sport = bpf_ntohs(ports[0]);
		ft.dport = bpf_ntohs(ports[1]);
	}
	flow = ((__u64)bpf_ntohl(ip->saddr) << 32) | ((__u64)ft.sport << 16) | ft.dport;

	now = now_ns();
	v = bpf_map_lookup_elem(&last_seen, &ft);
	t = FULL;
	if (!v) {
		bpf_map_update_elem(&last_seen, &ft, &now, BPF_NOEXIST);
	} else {
		__u64 prev = __sync_lock_test_and_set(v, now);
		gap = now > prev ? now - prev : 0;
		v = bpf_map_lookup_elem(&tokens, &flow);
		t = v ? *v : FULL;
		refill = gap / NS_PER_UNIT;
		if (refill > FULL)
			refill = FULL;
		t += refill;
		if (t > FULL)
			t = FULL;
	}
	if (t < SCALE) {
		bpf_map_update_elem(&tokens, &flow, &t, BPF_ANY);
		count(1);
		return XDP_DROP;
	}
	t -= SCALE;
	bpf_map_update_elem(&tokens, &flow, &t, BPF_ANY);
	count(0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
