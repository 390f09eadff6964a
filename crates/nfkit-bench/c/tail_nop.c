/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * N no-op XDP programs chained by bpf_tail_call, the tail-call side of
 * the "N calls to a no-op NF" benchmark. tn_entry tail-calls slot 0 of
 * tn_jmp; tn_nop<k> does nothing and tail-calls slot k + 1. The bench
 * fills slots 0..N-1 with tn_nop0..tn_nop<N-1>, so a packet makes N tail
 * calls; the first empty slot ends the chain (the failed tail call falls
 * through to XDP_PASS).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define TN_SLOTS 9

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, TN_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} tn_jmp SEC(".maps");

SEC("xdp") int tn_entry(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &tn_jmp, 0);
	return XDP_PASS;
}

#define TN_NOP(k)                                       \
	SEC("xdp") int tn_nop##k(struct xdp_md *ctx)    \
	{                                               \
		bpf_tail_call(ctx, &tn_jmp, (k) + 1);   \
		return XDP_PASS;                        \
	}

TN_NOP(0)
TN_NOP(1)
TN_NOP(2)
TN_NOP(3)
TN_NOP(4)
TN_NOP(5)
TN_NOP(6)
TN_NOP(7)

char _license[] SEC("license") = "GPL";
