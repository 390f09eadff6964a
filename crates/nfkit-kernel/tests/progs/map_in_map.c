/* Maps of maps declared the libbpf way: an array of maps whose slots 0
 * and 2 start with array maps, a hash of maps whose keys 1 and 3 start
 * with hash maps; the other slots are empty (lookup gives NULL). The
 * frame's first bytes pick the outer key, the inner key and what to do
 * with the inner value. */
#include "common.h"

struct counters {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counts_a SEC(".maps"), counts_b SEC(".maps"), counts_spare SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct counters);
} by_slot SEC(".maps") = {
	.values = { [0] = &counts_a, [2] = &counts_b },
};

struct flows {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} flows_x SEC(".maps"), flows_y SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 8);
	__type(key, __u32);
	__array(values, struct flows);
} by_key SEC(".maps") = {
	.values = { [1] = &flows_x, [3] = &flows_y },
};

/* Array of maps: the inner value counts bytes; odd third byte: the
 * value is replaced through bpf_map_update_elem on the inner map. */
SEC("xdp")
int mim_array(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	if (!IN_PKT(p, 3, (void *)(long)ctx->data_end))
		return XDP_PASS;
	__u32 okey = p[0] & 3, ikey = p[1] & 7;
	void *inner = bpf_map_lookup_elem(&by_slot, &okey);
	if (!inner)
		return XDP_PASS;
	__u64 *v = bpf_map_lookup_elem(inner, &ikey);
	if (!v)
		return XDP_ABORTED; /* ikey 4..7: beyond the inner array */
	*v += p[2] + 1;
	if (p[2] & 1) {
		__u64 nv = *v * 3;
		if (bpf_map_update_elem(inner, &ikey, &nv, BPF_ANY))
			return XDP_ABORTED;
	}
	return (*v & 1) ? XDP_DROP : XDP_TX;
}

/* Hash of maps: a missing inner key is inserted, a present one counted
 * and, when the third byte's bit 1 is set, deleted again. */
SEC("tc")
int mim_hash(struct __sk_buff *skb)
{
	__u8 *p = (void *)(long)skb->data;
	if (!IN_PKT(p, 3, (void *)(long)skb->data_end))
		return TC_ACT_OK;
	__u32 okey = p[0] & 7, ikey = p[1] & 15;
	void *inner = bpf_map_lookup_elem(&by_key, &okey);
	if (!inner)
		return TC_ACT_OK;
	__u64 *v = bpf_map_lookup_elem(inner, &ikey);
	if (!v) {
		__u64 one = 1;
		long r = bpf_map_update_elem(inner, &ikey, &one, BPF_NOEXIST);
		return r ? TC_ACT_SHOT : TC_ACT_PIPE;
	}
	*v += 1;
	if (p[2] & 2)
		return bpf_map_delete_elem(inner, &ikey) ? TC_ACT_SHOT : TC_ACT_RECLASSIFY;
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
