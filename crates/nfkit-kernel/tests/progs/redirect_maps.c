/* bpf_redirect_map into a cpumap, an xskmap and a devmap_hash: the
 * frame's first byte picks the key (0..3), its second byte is the flags
 * argument as it is (low bits: the verdict when the key has no entry;
 * BPF_F_BROADCAST and BPF_F_EXCLUDE_INGRESS, which only devmaps take;
 * anything else aborts). */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} ports SEC(".maps");

static __always_inline int pick(struct xdp_md *ctx, void *map)
{
	__u8 *p = (void *)(long)ctx->data;
	if (!IN_PKT(p, 2, (void *)(long)ctx->data_end))
		return XDP_PASS;
	return bpf_redirect_map(map, p[0] & 3, p[1]);
}

SEC("xdp")
int to_cpu(struct xdp_md *ctx)
{
	return pick(ctx, &cpus);
}

SEC("xdp")
int to_xsk(struct xdp_md *ctx)
{
	return pick(ctx, &xsks);
}

SEC("xdp")
int to_port(struct xdp_md *ctx)
{
	return pick(ctx, &ports);
}

char LICENSE[] SEC("license") = "GPL";
