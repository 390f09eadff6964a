// SPDX-License-Identifier: MIT OR Apache-2.0
// nfkit's counting receiver: at a device's XDP hook, counts frames,
// bytes and source addresses, and for frames with an NFKQ sequence
// stamp (UDP payload: "NFKQ", stream u32, sequence u64, big-endian)
// marks the sequence number in a per-stream bitmap: duplicates by an
// atomic fetch-or, reordered frames against the highest number seen.
// User space reads the maps; optionally (stream, seq) records go to a
// ring buffer in arrival order. Stamped frames are dropped after
// counting unless `pass` is set; other frames pass.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NSLOTS 8

struct cfg {
	__u32 pass;    // pass stamped frames instead of dropping them
	__u32 log;     // write (stream, seq) records to `seqlog`
	__u64 window;  // sequence numbers tracked per stream: 0..window-1
	__u64 words;   // bitmap words per stream (window / 64)
	__u64 limit;   // count this many frames, then let the rest pass (0: no limit)
};

struct stream_stats {
	__u64 received;
	__u64 duplicates;
	__u64 reordered;
	__u64 highest1; // highest sequence number + 1 (0: none yet)
	__u64 out_of_range;
};

struct totals {
	__u64 frames;
	__u64 bytes;
	__u64 unstamped;
	__u64 no_slot;   // stamped frames of streams beyond NSLOTS
	__u64 log_lost;  // records the ring buffer had no room for
	__u64 other;     // frames that are not IP (or sources beyond the table)
	__u64 first_ns;  // coarse clock of the first frame on this CPU
	__u64 last_ns;   // coarse clock of the latest frame on this CPU
};

struct src_key {
	__u32 family; // 4 or 6
	__u8 addr[16];
};

struct rec {
	__u32 stream;
	__u32 pad;
	__u64 seq;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__type(value, __u64);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOTS);
	__type(key, __u32);
	__type(value, struct stream_stats);
} sstats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} bitmap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct totals);
} totals SEC(".maps");

// Frames taken so far, all CPUs (only kept with a limit).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} taken SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct src_key);
	__type(value, __u64);
} sources SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} seqlog SEC(".maps");

static __always_inline void count_source(struct totals *t, struct src_key *k)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(&sources, k);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	if (bpf_map_update_elem(&sources, k, &one, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(&sources, k);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		t->other++;
}

static __always_inline int find_slot(__u32 stream)
{
	__u64 want = (__u64)stream | (1ULL << 32);
#pragma unroll
	for (__u32 i = 0; i < NSLOTS; i++) {
		__u32 k = i;
		__u64 *s = bpf_map_lookup_elem(&slots, &k);
		if (!s)
			return -1;
		__u64 v = *s;
		if (v == want)
			return i;
		if (v == 0) {
			v = __sync_val_compare_and_swap(s, 0, want);
			if (v == 0 || v == want)
				return i;
		}
	}
	return -1;
}

static __always_inline void count_seq(struct cfg *c, struct totals *t, __u32 stream, __u64 n)
{
	int slot = find_slot(stream);
	if (slot < 0) {
		t->no_slot++;
		return;
	}
	__u32 k = slot;
	struct stream_stats *s = bpf_map_lookup_elem(&sstats, &k);
	if (!s)
		return;
	if (n >= c->window) {
		__sync_fetch_and_add(&s->out_of_range, 1);
		return;
	}
	__u32 w = (__u32)(slot * c->words + (n >> 6));
	__u64 *word = bpf_map_lookup_elem(&bitmap, &w);
	if (!word)
		return;
	__u64 bit = 1ULL << (n & 63);
	__u64 old = __sync_fetch_and_or(word, bit);
	if (old & bit) {
		__sync_fetch_and_add(&s->duplicates, 1);
		return;
	}
	__u64 h = s->highest1;
	if (h && n + 1 < h)
		__sync_fetch_and_add(&s->reordered, 1);
	__sync_fetch_and_add(&s->received, 1);
	for (int i = 0; i < 4 && n + 1 > h; i++) {
		__u64 seen = __sync_val_compare_and_swap(&s->highest1, h, n + 1);
		if (seen == h)
			break;
		h = seen;
	}
}

SEC("xdp")
int nfkit_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct cfg *c = bpf_map_lookup_elem(&config, &zero);
	struct totals *t = bpf_map_lookup_elem(&totals, &zero);
	if (!c || !t)
		return XDP_PASS;
	if (c->limit) {
		__u64 *n = bpf_map_lookup_elem(&taken, &zero);
		if (!n || __sync_fetch_and_add(n, 1) >= c->limit)
			return XDP_PASS;
	}
	__u64 now = bpf_ktime_get_coarse_ns();
	if (!t->first_ns)
		t->first_ns = now;
	t->last_ns = now;
	t->frames++;
	t->bytes += end - data;

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end) {
		t->other++;
		return XDP_PASS;
	}
	__u16 proto = eth->h_proto;
	void *l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if (l3 + 4 > end) {
			t->other++;
			return XDP_PASS;
		}
		proto = *(__u16 *)(l3 + 2);
		l3 += 4;
	}
	struct src_key k = {};
	__u8 l4proto;
	void *l4;
	void *l3end;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		if ((void *)(ip + 1) > end) {
			t->other++;
			return XDP_PASS;
		}
		k.family = 4;
		__builtin_memcpy(k.addr, &ip->saddr, 4);
		l4proto = ip->protocol;
		l4 = l3 + ip->ihl * 4;
		l3end = l3 + bpf_ntohs(ip->tot_len);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip = l3;
		if ((void *)(ip + 1) > end) {
			t->other++;
			return XDP_PASS;
		}
		k.family = 6;
		__builtin_memcpy(k.addr, &ip->saddr, 16);
		l4proto = ip->nexthdr;
		l4 = ip + 1;
		l3end = l4 + bpf_ntohs(ip->payload_len);
	} else {
		t->other++;
		return XDP_PASS;
	}
	count_source(t, &k);
	struct udphdr *udp = l4;
	__u8 *p = (void *)(udp + 1);
	if (l4proto != IPPROTO_UDP || (void *)(p + 16) > end || (void *)(p + 16) > l3end ||
	    p[0] != 'N' || p[1] != 'F' || p[2] != 'K' || p[3] != 'Q') {
		t->unstamped++;
		return XDP_PASS;
	}
	__u32 stream = ((__u32)p[4] << 24) | ((__u32)p[5] << 16) | ((__u32)p[6] << 8) | p[7];
	__u64 n = 0;
#pragma unroll
	for (int i = 8; i < 16; i++)
		n = (n << 8) | p[i];
	count_seq(c, t, stream, n);
	if (c->log) {
		struct rec r = { .stream = stream, .seq = n };
		if (bpf_ringbuf_output(&seqlog, &r, sizeof(r), 0))
			t->log_lost++;
	}
	return c->pass ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
