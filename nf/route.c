/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module route
 * @hooks xdp tc socket
 * Longest-prefix-match routing on the destination address, one LPM table
 * per IP version. A next hop is an interface and, optionally, the Ethernet
 * addresses to write before sending the packet there.
 * @const ROUTE_F_MAC next-hop flag: forward() rewrites the destination and source MAC addresses
 * @map nf_route_v4 LPM trie (16384): {prefixlen u32, addr[4]} -> {ifindex u32, flags u32, dmac[6], smac[6]}
 * @map nf_route_v6 LPM trie (16384): {prefixlen u32, addr[16]} -> same next hop
 */
#include "nfkit.h"

#define NF_ROUTE_F_MAC 1
#define NF_ROUTE_ENTRIES 16384

struct nf_route_nh {
	__u32 ifindex;
	__u32 flags;
	__u8 dmac[6];
	__u8 smac[6];
};

struct nf_route_key4 {
	__u32 prefixlen;
	__u8 addr[4];
};

struct nf_route_key6 {
	__u32 prefixlen;
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NF_ROUTE_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_route_key4);
	__type(value, struct nf_route_nh);
} nf_route_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NF_ROUTE_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_route_key6);
	__type(value, struct nf_route_nh);
} nf_route_v6 SEC(".maps");

static __always_inline struct nf_route_nh *nf__route(struct nf_pkt_info *pi)
{
	if (pi->ip_version == 4) {
		struct nf_route_key4 k = { .prefixlen = 32 };
		__builtin_memcpy(k.addr, pi->dst + 12, 4);
		return bpf_map_lookup_elem(&nf_route_v4, &k);
	}
	if (pi->ip_version == 6) {
		struct nf_route_key6 k = { .prefixlen = 128 };
		__builtin_memcpy(k.addr, pi->dst, 16);
		return bpf_map_lookup_elem(&nf_route_v6, &k);
	}
	return 0;
}

/**
 * @nf lpm_lookup()
 * Look the destination address up in the routing table of its IP version.
 * @returns the next hop's ifindex (1..2^32 - 1) of the longest matching
 *          prefix; 0 when no prefix matches or the packet is not IP.
 * @maps nf_route_v4 nf_route_v6
 * @bad no arguments. A route with ifindex 0 reads as no route (0).
 */
NF(lpm_lookup)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_route_nh *nh;

	if (!pi)
		return NF_FAULT;
	nh = nf__route(pi);
	return nh ? nh->ifindex : 0;
}
NF_EXPORT(lpm_lookup);

#if NF_HOOK_ID != NF_HOOKID_SOCKET
/**
 * @nf forward()
 * Route the packet: look the destination up like lpm_lookup(); if the
 * next hop has ROUTE_F_MAC, write its dmac / smac into the Ethernet header;
 * redirect to its interface. (The TTL is not changed: call set_ttl.)
 * @returns the verdict REDIRECT(ifindex) of the next hop; the value 0 when
 *          there is no route (the chain decides what happens then).
 * @maps nf_route_v4 nf_route_v6
 * @bad no arguments. A route with ifindex 0: the value 0. ROUTE_F_MAC on a
 *      frame too short for an Ethernet header: redirected unchanged.
 * @hooks xdp tc
 */
NF(forward)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_route_nh *nh;

	if (!pi)
		return NF_FAULT;
	nh = nf__route(pi);
	if (!nh || !nh->ifindex)
		return 0;
	if (nh->flags & NF_ROUTE_F_MAC) {
		void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
		struct ethhdr *eth = data;
		if ((void *)(eth + 1) <= end) {
			__builtin_memcpy(eth->h_dest, nh->dmac, 6);
			__builtin_memcpy(eth->h_source, nh->smac, 6);
		}
	}
	return NF_REDIRECT(nh->ifindex);
}
NF_EXPORT(forward);
#endif
