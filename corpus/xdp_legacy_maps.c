/* XDP with a legacy `maps` section map (struct bpf_map_def, as before
 * BTF-defined maps): count packets per EtherType class; drop ARP when
 * the counter map's "arp policy" slot says so.
 * libbpf >= 1.0 (and so bpftool) refuses legacy map definitions; nfkit
 * reads them, and its ELF writer turns them into BTF-defined maps. */
#include "common.h"

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") ethertype_count = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 4,
};

struct bpf_map_def SEC("maps") policy = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u16),
	.value_size = sizeof(__u32),
	.max_entries = 16,
	.map_flags = 0,
};

SEC("xdp")
int xdp_legacy_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_DROP;
	__u16 proto = bpf_ntohs(eth->h_proto);
	__u32 slot = proto == ETH_P_IP ? 0 : proto == ETH_P_IPV6 ? 1 : proto == ETH_P_ARP ? 2 : 3;
	__u64 *c = bpf_map_lookup_elem(&ethertype_count, &slot);
	if (c)
		__sync_fetch_and_add(c, 1);
	__u32 *action = bpf_map_lookup_elem(&policy, &proto);
	if (action && *action <= XDP_REDIRECT)
		return *action;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
