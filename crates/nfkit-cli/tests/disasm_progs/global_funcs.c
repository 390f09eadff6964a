/* Global (BTF-checked) subprograms called from two programs. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__attribute__((noinline)) int classify_len(__u32 len)
{
	if (len < 64)
		return 0;
	if (len < 512)
		return 1;
	return 2;
}

__attribute__((noinline)) int add3(int a, int b, int c)
{
	return a + b * 2 + c * 3;
}

SEC("xdp")
int gf_xdp(struct xdp_md *ctx)
{
	return classify_len(ctx->data_end - ctx->data) + add3(1, 2, 3) > 20 ? XDP_DROP : XDP_PASS;
}

SEC("tc")
int gf_tc(struct __sk_buff *skb)
{
	return classify_len(skb->len);
}

char LICENSE[] SEC("license") = "GPL";
