/* EtherType filter: IPv6 and unknown types dropped, IPv4 and ARP pass. */
#include "common.h"

SEC("xdp")
int ethertype(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
