/* TCP flags filter: SYN+FIN and null scans dropped, SYN to port 22
 * redirected to ifindex 5; DSCP EF (46) traffic is sent back (TX). */
#include "common.h"

SEC("xdp")
int tcpflags(struct xdp_md *ctx)
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
	if ((ip->tos >> 2) == 46)
		return XDP_TX;
	if (ip->protocol != IPPROTO_TCP || ip->ihl != 5)
		return XDP_PASS;
	struct tcphdr *tcp = (void *)(ip + 1);
	if (!IN_PKT(tcp, sizeof(*tcp), end))
		return XDP_PASS;
	__u8 fl = ((__u8 *)tcp)[13];
	if ((fl & 0x03) == 0x03)
		return XDP_DROP;
	if ((fl & 0x3f) == 0)
		return XDP_DROP;
	if ((fl & 0x12) == 0x02 && tcp->dest == bpf_htons(22))
		return bpf_redirect(5, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
