/* Reads 8 bytes past a value of an inner map reached through an array of
 * maps: the kernel refuses it at load ("invalid access to map value"),
 * the VM faults when the read runs (a value of an inner map is bounded
 * like any other map value). */
#include "common.h"

struct counters {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counts_a SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct counters);
} by_slot SEC(".maps") = {
	.values = { [0] = &counts_a },
};

SEC("xdp")
int overread(struct xdp_md *ctx)
{
	__u32 zero = 0;
	void *inner = bpf_map_lookup_elem(&by_slot, &zero);
	if (!inner)
		return XDP_PASS;
	volatile __u64 *v = bpf_map_lookup_elem(inner, &zero);
	if (!v)
		return XDP_PASS;
	/* Element 1 follows element 0 in the map's buffer. */
	return v[1] == 0 ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
