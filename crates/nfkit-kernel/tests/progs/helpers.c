/* Helpers the corpus leaves out, for the VM-vs-kernel differential test:
 * xdp_adjust_meta and head growth, tail growth, xdp_load/store_bytes,
 * xdp_get_buff_len, map delete, LRU insertion, spin locks,
 * get_smp_processor_id, map_lookup_percpu_elem, TC checksum rewrites
 * (l3/l4_csum_replace, skb_store_bytes), skb_load_bytes in a socket
 * filter. */
#include "common.h"

struct locked_val {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct locked_val);
} locked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 128);
	__type(key, __u32);
	__type(value, __u64);
} recent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} cpu_seen SEC(".maps");

/* Metadata and head/tail resizing: a 4- or 8-byte tag in front of the
 * frame (metadata), an 8-byte header pushed in front for frames whose
 * first byte is even, the tail trimmed by 3 or grown by 5. */
SEC("xdp")
int xdp_meta(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 1 > end)
		return XDP_ABORTED;
	__u8 first = *(__u8 *)data;
	int msize = (first & 1) ? 4 : 8;
	if (bpf_xdp_adjust_meta(ctx, -msize))
		return XDP_ABORTED;
	void *meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	if (meta + 4 > data)
		return XDP_ABORTED;
	*(__u32 *)meta = 0x6e660000 | first;
	if (!(first & 2)) {
		if (bpf_xdp_adjust_head(ctx, -8))
			return XDP_DROP;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		if (data + 8 > end)
			return XDP_ABORTED;
		__builtin_memset(data, 0xa5, 8);
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	long len = end - data;
	if (len > 64) {
		if (bpf_xdp_adjust_tail(ctx, -3))
			return XDP_ABORTED;
		return XDP_TX;
	}
	if (bpf_xdp_adjust_tail(ctx, 5))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	__u32 off = (__u32)((end - data) - 5) & 63;
	__u8 *tail = data + off;
	if ((void *)(tail + 1) > end)
		return XDP_ABORTED;
	tail[0] = 0xee;
	return XDP_PASS;
}

/* Byte access helpers at packet-dependent offsets. */
SEC("xdp")
int xdp_bytes(struct xdp_md *ctx)
{
	__u8 buf[8] = {};
	__u8 off = 0;
	if (bpf_xdp_load_bytes(ctx, 15, &off, 1) < 0)
		return XDP_PASS;
	off &= 63;
	long r = bpf_xdp_load_bytes(ctx, off, buf, sizeof(buf));
	if (r < 0)
		return XDP_DROP;
	for (int i = 0; i < 8; i++)
		buf[i] ^= 0xff;
	r = bpf_xdp_store_bytes(ctx, off + 2, buf, 4);
	if (r < 0)
		return XDP_ABORTED;
	__u64 len = bpf_xdp_get_buff_len(ctx);
	return len > 200 ? XDP_TX : XDP_PASS;
}

/* Maps: hash insert/delete by packet byte, LRU insert (keys < capacity),
 * a spin-locked counter, the CPU number, and a per-CPU lookup by CPU. */
SEC("xdp")
int xdp_maps(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 20 > end)
		return XDP_PASS;
	__u8 *p = data;
	__u32 key = p[19] & 31;
	__u64 len = end - data;
	if (p[18] & 1) {
		long r = bpf_map_delete_elem(&flows, &key);
		if (r == 0)
			return XDP_DROP;
	} else {
		bpf_map_update_elem(&flows, &key, &len, (p[17] & 1) ? BPF_NOEXIST : BPF_ANY);
	}
	__u32 rkey = p[16] & 63;
	__u64 *seen = bpf_map_lookup_elem(&recent, &rkey);
	if (seen)
		*seen += len;
	else
		bpf_map_update_elem(&recent, &rkey, &len, BPF_ANY);
	__u32 slot = p[15] & 3;
	struct locked_val *lv = bpf_map_lookup_elem(&locked, &slot);
	if (lv) {
		bpf_spin_lock(&lv->lock);
		lv->packets++;
		lv->bytes += len;
		bpf_spin_unlock(&lv->lock);
	}
	__u32 zero = 0, one = 1;
	__u64 *c = bpf_map_lookup_elem(&cpu_seen, &zero);
	if (c)
		*c = bpf_get_smp_processor_id() + 100;
	__u64 *other = bpf_map_lookup_percpu_elem(&cpu_seen, &zero, 0);
	__u64 *cnt = bpf_map_lookup_elem(&cpu_seen, &one);
	if (cnt && other)
		*cnt += *other;
	return XDP_PASS;
}

/* TC: decrement the IPv4 TTL with l3_csum_replace; rewrite the UDP
 * destination port with skb_store_bytes and fix the UDP checksum with
 * l4_csum_replace when there is one. */
SEC("tc")
int tc_rewrite(struct __sk_buff *skb)
{
	__u8 hdr[20];
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, hdr, sizeof(hdr)) < 0)
		return TC_ACT_SHOT;
	if ((hdr[0] & 0x0f) != 5)
		return TC_ACT_UNSPEC;
	__u16 old_ttl = bpf_htons((__u16)hdr[8] << 8 | hdr[9]);
	if (hdr[8] <= 1)
		return TC_ACT_SHOT;
	__u8 ttl = hdr[8] - 1;
	__u16 new_ttl = bpf_htons((__u16)ttl << 8 | hdr[9]);
	if (bpf_skb_store_bytes(skb, ETH_HLEN + 8, &ttl, 1, 0) < 0)
		return TC_ACT_SHOT;
	if (bpf_l3_csum_replace(skb, ETH_HLEN + 10, old_ttl, new_ttl, 2) < 0)
		return TC_ACT_SHOT;
	if (hdr[9] != IPPROTO_UDP)
		return TC_ACT_OK;
	__be16 ports[2];
	if (bpf_skb_load_bytes(skb, ETH_HLEN + 20, ports, 4) < 0)
		return TC_ACT_OK;
	__be16 newport = bpf_htons(5353);
	if (bpf_skb_store_bytes(skb, ETH_HLEN + 22, &newport, 2, 0) < 0)
		return TC_ACT_SHOT;
	__u16 ucsum;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + 26, &ucsum, 2) < 0)
		return TC_ACT_OK;
	if (ucsum && bpf_l4_csum_replace(skb, ETH_HLEN + 26, ports[1], newport, 2) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_PIPE;
}

/* Socket filter: skb_load_bytes from the network header; keep the first
 * (version nibble * 8) bytes, or the whole packet for TTL 64. */
SEC("socket")
int socket_len(struct __sk_buff *skb)
{
	__u8 b[12];
	if (bpf_skb_load_bytes(skb, 0, b, sizeof(b)) < 0)
		return 0;
	if (b[8] == 64)
		return skb->len;
	return (b[0] >> 4) * 8;
}

char LICENSE[] SEC("license") = "GPL";
