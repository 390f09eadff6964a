/* sk_lookup and sk_lookup/... sections, the second a name libbpf 1.x
 * would not give a type to. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("sk_lookup")
int lookup(struct bpf_sk_lookup *ctx)
{
	return ctx->local_port == 7007 ? SK_DROP : SK_PASS;
}

SEC("sk_lookup/second")
int lookup2(struct bpf_sk_lookup *ctx)
{
	return ctx->protocol == 6 ? SK_PASS : SK_DROP;
}

char LICENSE[] SEC("license") = "GPL";
