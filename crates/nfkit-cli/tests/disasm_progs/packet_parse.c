/* Direct packet access through Ethernet, IPv4/IPv6 and TCP/UDP. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int parse(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	__u8 proto;
	void *l4;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return XDP_DROP;
		proto = ip->protocol;
		l4 = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return XDP_DROP;
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
	} else {
		return XDP_PASS;
	}
	if (proto == IPPROTO_TCP) {
		struct tcphdr *t = l4;
		if ((void *)(t + 1) > end)
			return XDP_DROP;
		return t->syn && !t->ack ? XDP_TX : XDP_PASS;
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *u = l4;
		if ((void *)(u + 1) > end)
			return XDP_DROP;
		return u->dest == bpf_htons(53) ? XDP_DROP : XDP_PASS;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
