/* Rewrites flower cannot make, each left to software: UDP decrements
 * the TTL with a wrong checksum update (one fold short of RFC 1624's,
 * plus one); TCP copies the source MAC into the destination MAC (a
 * byte from elsewhere in the packet, not a constant); both sent back. */
#include "common.h"

SEC("xdp")
int badcsum(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end) || ip->ihl != 5 || ip->ttl <= 1)
		return XDP_PASS;
	if (ip->protocol == IPPROTO_UDP) {
		__u16 old = *(__u16 *)&ip->ttl;
		ip->ttl--;
		__u16 new = *(__u16 *)&ip->ttl;
		__u32 s = (__u16)~ip->check + (__u16)~old + new;
		s = (s & 0xffff) + (s >> 16) + 1;
		ip->check = (__u16)~s;
		return XDP_TX;
	}
	if (ip->protocol == IPPROTO_TCP) {
		__builtin_memcpy(eth->h_dest, eth->h_source, 6);
		return XDP_TX;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
