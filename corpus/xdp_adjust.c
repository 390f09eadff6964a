/* XDP that resizes frames: frames with EtherType 0x88b5 (local
 * experimental) lose a 4-byte tag after the MAC addresses
 * (bpf_xdp_adjust_head); frames longer than 128 bytes are trimmed to
 * 128 (bpf_xdp_adjust_tail). */
#include "common.h"

#define ETH_P_EXP 0x88b5

SEC("xdp")
int xdp_adjust(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth) + 4, end))
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_EXP)) {
		/* Move the MAC addresses forward over the tag, then drop the tag. */
		__u8 macs[12];
		__builtin_memcpy(macs, data, 12);
		__builtin_memcpy(data + 4, macs, 12);
		if (bpf_xdp_adjust_head(ctx, 4))
			return XDP_ABORTED;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	long len = end - data;
	if (len > 128) {
		if (bpf_xdp_adjust_tail(ctx, (int)(128 - len)))
			return XDP_ABORTED;
		return XDP_TX;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
