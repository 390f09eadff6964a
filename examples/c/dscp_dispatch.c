/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * examples/dscp_dispatch.py written by hand as one ordinary XDP program
 * (the baseline of `make bench`).
 *
 * Same logic: the DSCP of an IPv4 or IPv6 packet picks the class: EF
 * (voice) decrements the TTL and sends the packet to UPLINK (or drops it
 * when the TTL would reach 0), AF41 (video) decrements the TTL and passes
 * it (or drops it), CS1 (scavenger) drops packets longer than 200 bytes
 * and sets the TTL of the others to 16. Every other packet passes. The TTL
 * byte and the IPv4 checksum sit at fixed offsets of an untagged frame
 * (as in the script), with the RFC 1624 incremental checksum update; a
 * packet too short for them is dropped (the script's fault action).
 * Parsing covers untagged Ethernet, IPv4 and IPv6 (nfkit's parser also
 * walks VLAN tags).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define EF 46
#define AF41 34
#define CS1 8
#define UPLINK 3
#define TTL_OFF (ETH_HLEN + 8)
#define CSUM_OFF (ETH_HLEN + 10)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} per_class SEC(".maps");

static __always_inline void count(__u32 class)
{
	__u64 *c = bpf_map_lookup_elem(&per_class, &class);
	if (c)
		__sync_fetch_and_add(c, 1);
}

/* Sets the TTL byte and updates the checksum (RFC 1624). */
static __always_inline void set_ttl(__u8 *p, __u8 ttl)
{
	__u16 word_old = ((__u16)p[TTL_OFF] << 8) | p[TTL_OFF + 1];
	__u16 word_new = ((__u16)ttl << 8) | (word_old & 0xff);
	__u32 csum = (__u16)~(((__u16)p[CSUM_OFF] << 8) | p[CSUM_OFF + 1]);

	csum += (__u16)~word_old + (__u32)word_new;
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (__u16)~csum;
	p[CSUM_OFF] = csum >> 8;
	p[CSUM_OFF + 1] = csum;
	p[TTL_OFF] = ttl;
}

SEC("xdp") int dscp_dispatch(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = (void *)data;
	__u8 dscp, ttl;

	if ((void *)(eth + 1) > (void *)end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > (void *)end || ip->version != 4 || ip->ihl < 5)
			return XDP_PASS;
		dscp = ip->tos >> 2;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > (void *)end || ip6->version != 6)
			return XDP_PASS;
		dscp = ((ip6->priority << 4) | (ip6->flow_lbl[0] >> 4)) >> 2;
	} else {
		return XDP_PASS;
	}
	switch (dscp) {
	case EF:
	case AF41:
		count(dscp == EF ? 0 : 1);
		if (data + CSUM_OFF + 2 > end)
			return XDP_DROP;
		ttl = data[TTL_OFF];
		if (ttl <= 1)
			return XDP_DROP;
		set_ttl(data, ttl - 1);
		return dscp == EF ? bpf_redirect(UPLINK, 0) : XDP_PASS;
	case CS1:
		count(2);
		if (end - data > 200)
			return XDP_DROP;
		if (data + CSUM_OFF + 2 > end)
			return XDP_DROP;
		set_ttl(data, 16);
		return XDP_PASS;
	default:
		return XDP_PASS;
	}
}

char _license[] SEC("license") = "GPL";
