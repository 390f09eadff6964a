/* IPv6 and IPv4 fragments: IPv6 with hop limit 0 dropped, IPv6 UDP to
 * port 53 from 2001:db8::/32 dropped; unfragmented IPv4 UDP to port
 * 5353 dropped (fragments pass). */
#include "common.h"

SEC("xdp")
int v6frag(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if (!IN_PKT(ip6, sizeof(*ip6), end))
			return XDP_PASS;
		if (ip6->hop_limit == 0)
			return XDP_DROP;
		if (ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		struct udphdr *udp = (void *)(ip6 + 1);
		if (!IN_PKT(udp, sizeof(*udp), end))
			return XDP_PASS;
		if (udp->dest == bpf_htons(53) &&
		    ip6->saddr.in6_u.u6_addr32[0] == bpf_htonl(0x20010db8))
			return XDP_DROP;
		return XDP_PASS;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return XDP_PASS;
	if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (ip->frag_off & bpf_htons(0x3fff))
		return XDP_PASS;
	struct udphdr *udp = (void *)(ip + 1);
	if (!IN_PKT(udp, sizeof(*udp), end))
		return XDP_PASS;
	if (udp->dest == bpf_htons(5353))
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
