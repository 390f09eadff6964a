/* Legacy section names libbpf 1.x does not type: xdp_foo, prog,
 * xdp_sock. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp_foo")
int legacy_foo(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("prog")
int legacy_prog(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp_sock")
int legacy_sock(struct xdp_md *ctx)
{
	return ctx->rx_queue_index ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
