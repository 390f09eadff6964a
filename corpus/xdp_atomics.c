/* XDP exercising every atomic: fetch-and-add/or/and/xor, compare and
 * swap and exchange on a map value; the verdict depends on the first
 * payload byte of the frame (after Ethernet). */
#include "common.h"

struct state {
	__u64 count;
	__u64 bits;
	__u64 mask;
	__u64 parity;
	__u64 owner;
	__u64 last;
	__u32 count32;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct state);
} state SEC(".maps");

SEC("xdp")
int xdp_atomics(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *p = data + sizeof(struct ethhdr);
	if (!IN_PKT(p, 1, end))
		return XDP_ABORTED;
	__u8 b = *p;
	__u32 zero = 0;
	struct state *s = bpf_map_lookup_elem(&state, &zero);
	if (!s)
		return XDP_ABORTED;
	__u64 before = __sync_fetch_and_add(&s->count, 1);
	__sync_fetch_and_add(&s->count32, 1);
	__sync_fetch_and_or(&s->bits, 1ULL << (b & 63));
	__sync_fetch_and_and(&s->mask, ~(1ULL << (b & 63)));
	__u64 par = __sync_fetch_and_xor(&s->parity, b);
	__u64 prev = __sync_val_compare_and_swap(&s->owner, 0, b + 1);
	__u64 old = __sync_lock_test_and_set(&s->last, b);
	if (prev != 0 && prev != (__u64)b + 1)
		return XDP_DROP;
	if ((before + par + old) & 1)
		return XDP_TX;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
