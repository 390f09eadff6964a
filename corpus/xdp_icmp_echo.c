/* XDP: answer ICMP echo requests in place (swap MACs and IPs, turn the
 * request into a reply, fix the checksum with bpf_csum_diff) and send
 * them back with XDP_TX; everything else passes. */
#include "common.h"

static __attribute__((noinline)) void swap_mac(struct ethhdr *eth)
{
	unsigned char tmp[ETH_ALEN];
	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

static __always_inline __u16 csum_fold(__u32 csum)
{
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	return (__u16)~csum;
}

__u64 replies = 0;

SEC("xdp")
int xdp_icmp_echo(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end) || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end) || ip->ihl != 5 || ip->protocol != IPPROTO_ICMP)
		return XDP_PASS;
	struct icmphdr *icmp = (void *)(ip + 1);
	if (!IN_PKT(icmp, sizeof(*icmp), end))
		return XDP_DROP;
	if (icmp->type != ICMP_ECHO)
		return XDP_PASS;

	__u32 old = *(__u32 *)icmp;
	icmp->type = ICMP_ECHOREPLY;
	__u32 new = *(__u32 *)icmp;
	__s64 diff = bpf_csum_diff(&old, sizeof(old), &new, sizeof(new), ~((__u32)icmp->checksum) & 0xffff);
	if (diff < 0)
		return XDP_ABORTED;
	icmp->checksum = csum_fold((__u32)diff);

	__u32 saddr = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = saddr;
	swap_mac(eth);
	__sync_fetch_and_add(&replies, 1);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
