/* nfkit's parse-once block as run-local memory. `scratch_parse` stores
 * the IP protocol into its slot of a per-CPU `nfkit_pktinfo` and
 * decides from what it stored (TCP dropped): stateless. `scratch_stale`
 * decides from a byte of the slot it never wrote in the run (left by
 * an earlier packet): software. */
#include "common.h"

struct info {
	__u8 proto;
	__u8 seen;
	__u8 pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct info);
} nfkit_pktinfo SEC(".maps");

static __always_inline int parse(struct xdp_md *ctx, struct info *pi)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	pi->proto = 0;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return 0;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return 0;
	pi->proto = ip->protocol;
	return 1;
}

SEC("xdp")
int scratch_parse(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct info *pi = bpf_map_lookup_elem(&nfkit_pktinfo, &k);
	if (!pi)
		return XDP_ABORTED;
	parse(ctx, pi);
	if (pi->proto == IPPROTO_TCP)
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int scratch_stale(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct info *pi = bpf_map_lookup_elem(&nfkit_pktinfo, &k);
	if (!pi)
		return XDP_ABORTED;
	parse(ctx, pi);
	if (pi->seen)
		return XDP_DROP;
	pi->seen = 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
