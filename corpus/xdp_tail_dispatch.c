/* XDP: dispatch by IP protocol through a prog array with tail calls.
 * The array is initialised statically (__array(values, ...)); slot 6
 * (TCP) and 17 (UDP) hold the handlers. A failed tail call passes. */
#include "common.h"

SEC("xdp")
int handle_tcp(struct xdp_md *ctx);
SEC("xdp")
int handle_udp(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 32);
	__uint(key_size, sizeof(__u32));
	__array(values, int(void *));
} jmp_table SEC(".maps") = {
	.values = {
		[IPPROTO_TCP] = (void *)&handle_tcp,
		[IPPROTO_UDP] = (void *)&handle_udp,
	},
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} handled SEC(".maps");

static __always_inline void bump(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&handled, &idx);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("xdp")
int handle_tcp(struct xdp_md *ctx)
{
	bump(0);
	return XDP_PASS;
}

SEC("xdp")
int handle_udp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	bump(1);
	/* Drop UDP datagrams shorter than 64 bytes on the wire. */
	if (data + 64 > end)
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_dispatch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end) || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return XDP_DROP;
	bpf_tail_call(ctx, &jmp_table, ip->protocol & 31);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
