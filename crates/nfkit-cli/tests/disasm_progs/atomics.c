/* Atomic operations on map values and globals (-mcpu=v3: fetch forms,
 * xchg, cmpxchg, and/or/xor). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

__u64 g64;
__u32 g32;

SEC("xdp")
int atomics(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&counts, &k);
	if (!v)
		return XDP_PASS;
	__sync_fetch_and_add(v, 1);
	__u64 old = __sync_fetch_and_add(&g64, 2);
	__sync_fetch_and_or(&g64, 4);
	__sync_fetch_and_and(&g32, 7);
	__sync_fetch_and_xor(&g32, 3);
	old += __sync_fetch_and_or(&g32, 1);
	old += __sync_lock_test_and_set(&g64, 9);
	old += __sync_val_compare_and_swap(&g32, 1, 2);
	return old & 1;
}

char LICENSE[] SEC("license") = "GPL";
