/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * examples/port_stats.py written by hand as one ordinary XDP program
 * (the baseline of `make bench`).
 *
 * Same logic: for IPv4 and IPv6 packets with an L4 header (any protocol
 * of a first fragment; TCP, UDP and SCTP only when the header is
 * complete, and only they have ports, else port 0), packets and bytes are
 * counted per destination port and the first packet length of each port
 * is kept; a port that gets more than BLOCK_AFTER packets is blocked (its
 * packet count deleted); packets to a blocked port are dropped and
 * counted there. Parsing covers untagged Ethernet, IPv4 and IPv6 without
 * extension headers.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define BLOCK_AFTER 5

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u64);
} packets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u64);
} bytes_ SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} blocked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u32);
} first_len SEC(".maps");

/* m[port] += v, inserting v when absent. */
static __always_inline __u64 add(void *map, __u16 *port, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(map, port);
	if (c)
		return __sync_fetch_and_add(c, v) + v;
	bpf_map_update_elem(map, port, &v, BPF_NOEXIST);
	return v;
}

SEC("xdp") int port_stats(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 len = end - data;
	void *l4h;
	__u8 proto, *b;
	__u16 port = 0;
	__u64 n;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5 ||
		    (ip->frag_off & bpf_htons(0x1fff)))
			return XDP_PASS;
		proto = ip->protocol;
		l4h = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->version != 6)
			return XDP_PASS;
		proto = ip6->nexthdr;
		l4h = ip6 + 1;
	} else {
		return XDP_PASS;
	}
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) {
		__be16 *ports = l4h;
		if (l4h + (proto == IPPROTO_TCP ? 20 : 8) > end)
			return XDP_PASS; /* truncated: no L4 header */
		port = bpf_ntohs(ports[1]);
	}

	b = bpf_map_lookup_elem(&blocked, &port);
	if (b) {
		*b += 1;
		return XDP_DROP;
	}
	n = add(&packets, &port, 1);
	add(&bytes_, &port, len);
	if (!bpf_map_lookup_elem(&first_len, &port))
		bpf_map_update_elem(&first_len, &port, &len, BPF_ANY);
	if (n > BLOCK_AFTER) {
		__u8 zero = 0;
		bpf_map_update_elem(&blocked, &port, &zero, BPF_ANY);
		bpf_map_delete_elem(&packets, &port);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
