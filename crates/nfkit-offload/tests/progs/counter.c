/* A stateful path next to stateless ones: UDP packets are counted and
 * dropped once 100 were seen (state: software); TCP to port 80 is
 * dropped (stateless); the rest passes. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} udp_count SEC(".maps");

SEC("xdp")
int counter(struct xdp_md *ctx)
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
	if (ip->protocol == IPPROTO_UDP) {
		__u32 k = 0;
		__u64 *c = bpf_map_lookup_elem(&udp_count, &k);
		if (!c)
			return XDP_PASS;
		if (__sync_fetch_and_add(c, 1) >= 100)
			return XDP_DROP;
		return XDP_PASS;
	}
	if (ip->protocol == IPPROTO_TCP && ip->ihl == 5) {
		struct tcphdr *tcp = (void *)(ip + 1);
		if (!IN_PKT(tcp, sizeof(*tcp), end))
			return XDP_PASS;
		if (tcp->dest == bpf_htons(80))
			return XDP_DROP;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
