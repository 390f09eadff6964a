/* Several programs in one section and in xdp.frags, sharing static and
 * global subprograms in .text; a bpf_loop callback (a function address
 * load) scans the first bytes of the frame. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __attribute__((noinline)) int bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);
	if (!v)
		return -1;
	__sync_fetch_and_add(v, by);
	return 0;
}

/* Global subprogram: verified on its own against its BTF signature. */
__attribute__((noinline)) int frame_class(__u32 len)
{
	if (len < 64)
		return 0;
	if (len < 512)
		return 1;
	return 2;
}

struct scan_ctx {
	__u8 bytes[16];
	__u32 zeros;
};

static long count_zero(__u32 i, void *arg)
{
	struct scan_ctx *c = arg;
	if (i >= 16)
		return 1;
	if (c->bytes[i] == 0)
		c->zeros++;
	return 0;
}

SEC("xdp")
int xdp_classify(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	int cls = frame_class(len);
	if (bump(cls & 7, 1) < 0)
		return XDP_ABORTED;
	return cls == 2 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_zero_scan(struct xdp_md *ctx)
{
	struct scan_ctx c = {};
	if (bpf_xdp_load_bytes(ctx, 0, c.bytes, sizeof(c.bytes)) < 0)
		return XDP_PASS;
	bpf_loop(16, count_zero, &c, 0);
	bump(3, c.zeros);
	return c.zeros > 8 ? XDP_DROP : XDP_PASS;
}

SEC("xdp.frags")
int xdp_frags_len(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	bump(4, len);
	return frame_class(len) == 0 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
