// SPDX-License-Identifier: MIT OR Apache-2.0
// A plain XDP forwarder for the benchmarks: every frame goes out of the
// device in slot 0 of the devmap `out` (native XDP_REDIRECT through a
// devmap), with its destination MAC set to `dmac`.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct fwd_cfg {
	__u8 dmac[6];
	__u8 smac[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fwd_cfg);
} fwdcfg SEC(".maps");

SEC("xdp")
int nfkit_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct fwd_cfg *c = bpf_map_lookup_elem(&fwdcfg, &zero);
	if (!c || data + 12 > end)
		return XDP_DROP;
	__builtin_memcpy(data, c->dmac, 6);
	__builtin_memcpy(data + 6, c->smac, 6);
	return bpf_redirect_map(&out, 0, 0);
}

SEC("xdp")
int nfkit_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
