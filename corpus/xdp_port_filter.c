/* XDP: drop UDP/TCP packets whose destination port is in a hash map;
 * count verdicts per action in a per-CPU array. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);   /* destination port, network order */
	__type(value, __u64); /* hits */
} blocked_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} verdicts SEC(".maps");

static __always_inline int count(__u32 action)
{
	__u64 *v = bpf_map_lookup_elem(&verdicts, &action);
	if (v)
		*v += 1;
	return action;
}

SEC("xdp")
int xdp_port_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return count(XDP_ABORTED);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return count(XDP_PASS);
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return count(XDP_ABORTED);
	if (ip->protocol != IPPROTO_UDP && ip->protocol != IPPROTO_TCP)
		return count(XDP_PASS);
	/* UDP and TCP both start with source and destination ports. */
	struct udphdr *l4 = (void *)ip + ip->ihl * 4;
	if (!IN_PKT(l4, sizeof(*l4), end))
		return count(XDP_ABORTED);
	__u16 port = l4->dest;
	__u64 *hits = bpf_map_lookup_elem(&blocked_ports, &port);
	if (hits) {
		__sync_fetch_and_add(hits, 1);
		return count(XDP_DROP);
	}
	return count(XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
