/* An array of maps and a hash of maps with an inner map. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} inner_a SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner);
} outer_arr SEC(".maps") = {
	.values = { &inner_a },
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner);
} outer_hash SEC(".maps");

SEC("xdp")
int mom(struct xdp_md *ctx)
{
	__u32 k = 0;
	void *in = bpf_map_lookup_elem(&outer_arr, &k);
	if (!in)
		in = bpf_map_lookup_elem(&outer_hash, &k);
	if (!in)
		return XDP_PASS;
	__u32 *v = bpf_map_lookup_elem(in, &k);
	return v ? *v & 3 : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
