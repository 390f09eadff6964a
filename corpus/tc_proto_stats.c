/* TC: count packets and bytes per IP protocol in an array map (.bss
 * totals too); shoot packets whose TTL is 1, read the TTL with
 * bpf_skb_load_bytes. */
#include "common.h"

struct proto_stats {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct proto_stats);
} proto_stats SEC(".maps");

__u64 total_packets;
__u64 total_bytes;
__u32 last_ttl;

SEC("tc")
int tc_proto_stats(struct __sk_buff *skb)
{
	__u8 hdr[20];
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, hdr, sizeof(hdr)) < 0)
		return TC_ACT_SHOT;
	__u32 proto = hdr[9];
	__u8 ttl = hdr[8];
	struct proto_stats *st = bpf_map_lookup_elem(&proto_stats, &proto);
	if (st) {
		__sync_fetch_and_add(&st->packets, 1);
		__sync_fetch_and_add(&st->bytes, skb->len);
	}
	__sync_fetch_and_add(&total_packets, 1);
	__sync_fetch_and_add(&total_bytes, skb->len);
	last_ttl = ttl;
	if (ttl <= 1)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
