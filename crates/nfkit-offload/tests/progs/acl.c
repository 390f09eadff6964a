/* IPv4 protocol + port ACL: TTL <= 1 dropped, UDP to 53 dropped, UDP to
 * 1000..1999 redirected to ifindex 3, TCP to 23 dropped, TCP to 7 sent
 * back (TX); IP options and everything else pass. */
#include "common.h"

SEC("xdp")
int acl(struct xdp_md *ctx)
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
		struct udphdr *udp = (void *)(ip + 1);
		if (!IN_PKT(udp, sizeof(*udp), end))
			return XDP_PASS;
		__u16 port = bpf_ntohs(udp->dest);
		if (port == 53)
			return XDP_DROP;
		if (port >= 1000 && port < 2000)
			return bpf_redirect(3, 0);
		return XDP_PASS;
	}
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip + 1);
		if (!IN_PKT(tcp, sizeof(*tcp), end))
			return XDP_PASS;
		if (tcp->dest == bpf_htons(23))
			return XDP_DROP;
		if (tcp->dest == bpf_htons(7))
			return XDP_TX;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
