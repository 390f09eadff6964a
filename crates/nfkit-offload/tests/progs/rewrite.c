/* Header rewrites flower can make (pedit, csum), clang-built:
 * - UDP: TTL decremented (checksum updated incrementally, folded the
 *   xdp-tutorial way), destination MAC set, redirected to ifindex 5;
 * - TCP: DSCP set to EF keeping ECN, the checksum recomputed from
 *   scratch over the header, sent back (TX);
 * - TTL <= 1: dropped; IP options and everything else pass. */
#include "common.h"
#include "csum.h"

SEC("xdp")
int rewrite(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return XDP_PASS;
	if (ip->ihl != 5)
		return XDP_PASS;
	if (ip->ttl <= 1)
		return XDP_DROP;
	if (ip->protocol == IPPROTO_UDP) {
		__u16 old = *(__u16 *)&ip->ttl;
		ip->ttl--;
		__u16 new = *(__u16 *)&ip->ttl;
		ip->check = csum_fold((__u16)~ip->check + (__u16)~old + new);
		eth->h_dest[0] = 0x02;
		eth->h_dest[1] = 0x00;
		eth->h_dest[2] = 0x5e;
		eth->h_dest[3] = 0x00;
		eth->h_dest[4] = 0x00;
		eth->h_dest[5] = 0x05;
		return bpf_redirect(5, 0);
	}
	if (ip->protocol == IPPROTO_TCP) {
		ip->tos = (ip->tos & 3) | (46 << 2);
		ip->check = 0;
		__u16 *w = (__u16 *)ip;
		__u32 s = 0;
#pragma unroll
		for (int i = 0; i < 10; i++)
			s += w[i];
		ip->check = csum_fold(s);
		return XDP_TX;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
