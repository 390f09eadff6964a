/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module sample
 * @hooks xdp tc socket
 * Deterministic per-flow sampling. A flow is the packet's 5-tuple in one
 * direction (non-IP packets form one flow); each (flow, n) pair has its
 * own packet counter, advanced with an atomic fetch-and-add so that
 * concurrent CPUs sample exactly one packet in n.
 * @map nf_sample_flows LRU hash (65536): {flow key (40 bytes), n u64} -> u64 packets seen
 */
#include "nfkit.h"

#define NF_SAMPLE_FLOWS 65536

/* The flow key (the first NF_FLOW_KEY_SIZE bytes of nf_pkt_info, named
 * so that tools show addresses and ports) and the sampling period. */
struct nf_sample_key {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport;
	__u8 l4_proto;
	__u8 ip_version;
	__u16 pad;
	__u64 n;
};
_Static_assert(__builtin_offsetof(struct nf_sample_key, n) == NF_FLOW_KEY_SIZE, "flow key");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_SAMPLE_FLOWS);
	__type(key, struct nf_sample_key);
	__type(value, __u64);
} nf_sample_flows SEC(".maps");

/**
 * @nf one_in(n)
 * Sample one packet in every n of the packet's flow: the flow's packets
 * number 1, n + 1, 2n + 1, ... are sampled.
 * @arg n sampling period in packets
 * @returns 1 for a sampled packet, else 0.
 * @maps nf_sample_flows
 * @bad n == 0: 0 for every packet (never sample), nothing stored. n == 1:
 *      1 for every packet, nothing stored. A full table evicts the least
 *      recently used flow, whose next packet is then its packet number 1.
 */
NF(one_in, n)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_sample_key k;
	__u64 *c, seen;

	if (!pi)
		return NF_FAULT;
	if (n <= 1)
		return n;
	__builtin_memcpy(&k, pi, NF_FLOW_KEY_SIZE);
	k.n = n;
	c = bpf_map_lookup_elem(&nf_sample_flows, &k);
	if (!c) {
		__u64 one = 1;
		if (bpf_map_update_elem(&nf_sample_flows, &k, &one, BPF_NOEXIST) == 0)
			return 1;
		c = bpf_map_lookup_elem(&nf_sample_flows, &k); /* another CPU created it */
		if (!c)
			return 0;
	}
	seen = __sync_fetch_and_add(c, 1);
	return seen % n == 0;
}
NF_EXPORT(one_in);
