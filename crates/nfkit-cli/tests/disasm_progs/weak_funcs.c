/* Weak global functions and a weak program. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__attribute__((weak, noinline)) int policy(int x)
{
	return x & 1;
}

__attribute__((weak)) SEC("xdp")
int weak_prog(struct xdp_md *ctx)
{
	return policy(ctx->rx_queue_index) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
