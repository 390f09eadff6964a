// A field the kernel's struct iphdr does not have, read behind a
// bpf_core_field_exists guard (the usual way to stay portable) and
// without one. Relocated against the running kernel, the guard is false:
// the guarded read is dead code, which the kernel's verifier skips and
// the VM must skip too; the unguarded read poisons its program.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct iphdr___nope {
	int missing_field;
	__u8 ttl;
} __attribute__((preserve_access_index));

SEC("xdp")
int xdp_guarded(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct iphdr___nope *ip = data + 14;
	if (data + 34 > end)
		return XDP_PASS;
	if (bpf_core_field_exists(ip->missing_field))
		return ip->missing_field == 7 ? XDP_DROP : XDP_ABORTED;
	return ip->ttl == 64 ? XDP_TX : XDP_DROP;
}

SEC("xdp")
int xdp_unguarded(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct iphdr___nope *ip = data + 14;
	if (data + 34 > end)
		return XDP_PASS;
	return ip->missing_field == 7 ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
