/* Static and global subprograms, nested calls, and a callback passed to
 * bpf_loop (an lddw of a function address). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __attribute__((noinline)) int leaf(int x)
{
	return x ^ 0x55;
}

static __attribute__((noinline)) int middle(int x)
{
	return leaf(x) + leaf(x + 1);
}

__attribute__((noinline)) int global_sub(struct xdp_md *ctx)
{
	if (!ctx)
		return 0;
	return ctx->ingress_ifindex + 1;
}

static long step(__u32 i, void *data)
{
	*(int *)data += i;
	return 0;
}

SEC("xdp")
int calls(struct xdp_md *ctx)
{
	int sum = 0;
	bpf_loop(10, step, &sum, 0);
	return (middle(sum) + global_sub(ctx)) & 3;
}

char LICENSE[] SEC("license") = "GPL";
