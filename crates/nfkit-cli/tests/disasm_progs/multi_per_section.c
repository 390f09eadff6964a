/* Several programs in one section, and several sections. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int first(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int second(struct xdp_md *ctx)
{
	return ctx->data_end - ctx->data > 100 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int third(struct xdp_md *ctx)
{
	return ctx->ingress_ifindex == 3 ? XDP_TX : XDP_PASS;
}

SEC("tc")
int tc_one(struct __sk_buff *skb)
{
	return skb->len > 64;
}

SEC("tc")
int tc_two(struct __sk_buff *skb)
{
	return skb->protocol == 8;
}

char LICENSE[] SEC("license") = "GPL";
