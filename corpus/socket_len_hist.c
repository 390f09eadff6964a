/* Socket filter: a per-CPU histogram of packet lengths. The bucket is
 * found by a bounded (not unrolled) loop over the thresholds in .rodata,
 * inside a global subprogram; a static subprogram counts bytes of the
 * IPv4 payload read with bpf_skb_load_bytes; totals live in .bss and
 * .data and are updated atomically. Keeps every packet whole. */
#include "common.h"

#define NBUCKETS 8

const volatile __u32 thresholds[NBUCKETS] = {64, 128, 256, 512, 1024, 1500, 9000, 65535};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NBUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} len_hist SEC(".maps");

__u64 total_packets;
__u64 nonzero_first = 0;
__u64 generation = 1;

__attribute__((noinline)) int len_bucket(__u32 len)
{
	int b = NBUCKETS - 1;
#pragma clang loop unroll(disable)
	for (int i = 0; i < NBUCKETS; i++) {
		if (len <= thresholds[i]) {
			b = i;
			break;
		}
	}
	return b;
}

static __attribute__((noinline)) int first_byte_nonzero(struct __sk_buff *skb)
{
	__u8 b = 0;
	if (bpf_skb_load_bytes(skb, sizeof(struct iphdr), &b, 1) < 0)
		return 0;
	return b != 0;
}

SEC("socket")
int socket_len_hist(struct __sk_buff *skb)
{
	__u32 key = len_bucket(skb->len);
	__u64 *slot = bpf_map_lookup_elem(&len_hist, &key);
	if (slot)
		*slot += 1;
	__sync_fetch_and_add(&total_packets, 1);
	if (skb->protocol == bpf_htons(ETH_P_IP) && first_byte_nonzero(skb))
		__sync_fetch_and_add(&nonzero_first, 1);
	return skb->len;
}

char LICENSE[] SEC("license") = "GPL";
