/* Address blacklists filled by the control plane: source prefixes in an
 * LPM trie (value 1: drop, anything else: pass), destination addresses
 * in a hash map (present: drop). */
#include "common.h"

struct lpm_key {
	__u32 prefixlen;
	__u32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u32);
} src_prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} dst_block SEC(".maps");

SEC("xdp")
int blacklist(struct xdp_md *ctx)
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
	struct lpm_key k = {32, ip->saddr};
	__u32 *v = bpf_map_lookup_elem(&src_prefixes, &k);
	if (v && *v == 1)
		return XDP_DROP;
	__u32 d = ip->daddr;
	if (bpf_map_lookup_elem(&dst_block, &d))
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
