/* Bounded loops, a switch, and signed/unsigned compares. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int loops(struct xdp_md *ctx)
{
	unsigned char *p = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	int sum = 0;
	for (int i = 0; i < 32; i++) {
		if (p + i + 1 > end)
			break;
		sum += p[i];
	}
	long s = (long)sum - 1000;
	switch (sum & 7) {
	case 0: return XDP_DROP;
	case 3: return XDP_TX;
	case 5: return s < -5 ? XDP_ABORTED : XDP_PASS;
	default: return XDP_PASS;
	}
}

char LICENSE[] SEC("license") = "GPL";
