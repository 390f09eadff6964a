/* Byte order conversions and shifts on packet fields. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int swaps(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	__u16 proto = bpf_ntohs(eth->h_proto);
	__u32 w = *(__u32 *)eth->h_dest;
	__u64 q = bpf_be64_to_cpu(*(__u64 *)eth);
	w = bpf_ntohl(w);
	return ((proto ^ w ^ (q >> 17)) & 1) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
