/* XDP: longest-prefix match on the IPv4 destination; the route says
 * drop, pass, or redirect to an interface. Unrouted packets are counted
 * in a per-CPU hash keyed by destination. */
#include "common.h"

struct lpm_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct route {
	__u32 action; /* 0 drop, 1 pass, 2 redirect */
	__u32 ifindex;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, struct route);
} routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 128);
	__type(key, __u32);
	__type(value, __u64);
} unrouted SEC(".maps");

SEC("xdp")
int xdp_lpm_route(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return XDP_DROP;
	struct lpm_key key = {.prefixlen = 32};
	__builtin_memcpy(key.addr, &ip->daddr, 4);
	struct route *r = bpf_map_lookup_elem(&routes, &key);
	if (!r) {
		__u32 dst = ip->daddr;
		__u64 one = 1, *n = bpf_map_lookup_elem(&unrouted, &dst);
		if (n)
			*n += 1;
		else
			bpf_map_update_elem(&unrouted, &dst, &one, BPF_NOEXIST);
		return XDP_PASS;
	}
	switch (r->action) {
	case 0:
		return XDP_DROP;
	case 2:
		return bpf_redirect(r->ifindex, 0);
	default:
		return XDP_PASS;
	}
}

char LICENSE[] SEC("license") = "GPL";
