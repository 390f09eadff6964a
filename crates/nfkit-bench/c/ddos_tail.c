/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The DDoS example (examples/ddos.py) as a classic tail-call pipeline:
 * four XDP programs joined by bpf_tail_call through the prog array
 * td_jmp, passing the parsed packet through a per-CPU scratch slot.
 *
 *   td_parse      parse L2/L3/L4 once into td_scratch, tail-call slot 0
 *   td_blacklist  (slot 0) source blacklisted? sample one in 10 of its
 *                 packets to the collector, drop the rest; else slot 1
 *   td_dst        (slot 1) destination token bucket (100/s, burst 20):
 *                 in profile -> PASS; else slot 2
 *   td_pair       (slot 2) (source, destination) bucket (20/s, burst 5):
 *                 empty -> blacklist the source for 10 s and DROP; else PASS
 *
 * A failed tail call drops the packet (the fault action of nfkit's
 * chains). Counters as in the script (PASSED, DROPPED, REDIRECTED).
 * Maps, buckets, sampling and parsing as in examples/c/ddos.c (the same
 * logic as one program), so the two differ only by the tail calls and
 * the scratch slot that carries the parsed packet between programs.
 * Time comes from bpf_ktime_get_ns().
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define COLLECTOR 7
#define SAMPLE 10
#define BLACKLIST_NS 10000000000ULL
#define DST_RATE 100
#define DST_BURST 20
#define PAIR_RATE 20
#define PAIR_BURST 5
#define UNIT 1000000000ULL

enum { PASSED, DROPPED, REDIRECTED };
enum { SLOT_BLACKLIST, SLOT_DST, SLOT_PAIR, SLOTS };

/* The flow key: addresses as 16 bytes (IPv4 mapped to ::ffff:a.b.c.d). */
struct td_pkt {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct td_bucket {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 tokens; /* 10^-9 tokens */
	__u64 last_ns;
};

struct td_addr {
	__u8 a[16];
};

struct td_pair_key {
	__u8 a[32];
};

struct td_sample_key {
	struct td_pkt flow;
	__u64 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} td_jmp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct td_pkt);
} td_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct td_addr);
	__type(value, __u64);
} td_blacklist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct td_sample_key);
	__type(value, __u64);
} td_sample SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct td_addr);
	__type(value, struct td_bucket);
} td_dst_tb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct td_pair_key);
	__type(value, struct td_bucket);
} td_pair_tb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} td_counters SEC(".maps");

static __always_inline __u64 td_now(void)
{
	return bpf_ktime_get_ns();
}

static __always_inline struct td_pkt *td_pkt(void)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(&td_scratch, &k);
}

static __always_inline void td_count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&td_counters, &what);
	if (c)
		__sync_fetch_and_add(c, 1);
}

/* 1 when the bucket had a whole token (and took it), else 0. */
static __always_inline int td_take(void *map, void *key, __u64 rate, __u64 burst, __u64 now)
{
	__u64 full = burst * UNIT, elapsed, room;
	struct td_bucket *b = bpf_map_lookup_elem(map, key);
	int ok;

	if (!b) {
		struct td_bucket nb = { .tokens = full, .last_ns = now };
		bpf_map_update_elem(map, key, &nb, BPF_NOEXIST);
		b = bpf_map_lookup_elem(map, key);
		if (!b)
			return 0;
	}
	bpf_spin_lock(&b->lock);
	elapsed = now > b->last_ns ? now - b->last_ns : 0;
	b->last_ns = now;
	room = full - b->tokens;
	if (elapsed > room / rate)
		b->tokens = full;
	else
		b->tokens += elapsed * rate;
	ok = b->tokens >= UNIT;
	if (ok)
		b->tokens -= UNIT;
	bpf_spin_unlock(&b->lock);
	return ok;
}

SEC("xdp") int td_parse(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct td_pkt *p = td_pkt();
	struct ethhdr *eth = data;
	__u32 *a;
	__u8 l4 = 0;
	void *l4h = 0;

	if (!p)
		return XDP_DROP;
	__builtin_memset(p, 0, sizeof(*p));
	if ((void *)(eth + 1) > end)
		goto next;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5)
			goto next;
		a = (__u32 *)p->src;
		a[2] = bpf_htonl(0xffff);
		a[3] = ip->saddr;
		a = (__u32 *)p->dst;
		a[2] = bpf_htonl(0xffff);
		a[3] = ip->daddr;
		l4 = ip->protocol;
		if (!(ip->frag_off & bpf_htons(0x1fff)))
			l4h = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->version != 6)
			goto next;
		__builtin_memcpy(p->src, &ip6->saddr, 16);
		__builtin_memcpy(p->dst, &ip6->daddr, 16);
		l4 = ip6->nexthdr;
		l4h = ip6 + 1;
	}
	p->proto = l4;
	if (l4h && ((l4 == IPPROTO_UDP && l4h + 8 <= end) || (l4 == IPPROTO_TCP && l4h + 20 <= end))) {
		__be16 *ports = l4h;
		p->sport = bpf_ntohs(ports[0]);
		p->dport = bpf_ntohs(ports[1]);
	}
next:
	bpf_tail_call(ctx, &td_jmp, SLOT_BLACKLIST);
	return XDP_DROP;
}

SEC("xdp") int td_blacklist_stage(struct xdp_md *ctx)
{
	struct td_pkt *p = td_pkt();
	__u64 now = td_now(), *exp;

	if (!p)
		return XDP_DROP;
	exp = bpf_map_lookup_elem(&td_blacklist, p->src);
	if (exp && now < *exp) {
		struct td_sample_key k = { .n = SAMPLE };
		__u64 *seen, one = 1;
		int sampled = 0;

		k.flow = *p;
		seen = bpf_map_lookup_elem(&td_sample, &k);
		if (seen)
			sampled = __sync_fetch_and_add(seen, 1) % SAMPLE == 0;
		else if (bpf_map_update_elem(&td_sample, &k, &one, BPF_NOEXIST) == 0)
			sampled = 1;
		if (sampled) {
			td_count(REDIRECTED);
			return bpf_redirect(COLLECTOR, 0);
		}
		td_count(DROPPED);
		return XDP_DROP;
	}
	bpf_tail_call(ctx, &td_jmp, SLOT_DST);
	return XDP_DROP;
}

SEC("xdp") int td_dst_stage(struct xdp_md *ctx)
{
	struct td_pkt *p = td_pkt();

	if (!p)
		return XDP_DROP;
	if (td_take(&td_dst_tb, p->dst, DST_RATE, DST_BURST, td_now())) {
		td_count(PASSED);
		return XDP_PASS;
	}
	bpf_tail_call(ctx, &td_jmp, SLOT_PAIR);
	return XDP_DROP;
}

SEC("xdp") int td_pair_stage(struct xdp_md *ctx)
{
	struct td_pkt *p = td_pkt();
	__u64 now = td_now();

	if (!p)
		return XDP_DROP;
	if (!td_take(&td_pair_tb, p->src, PAIR_RATE, PAIR_BURST, now)) {
		__u64 exp = now + BLACKLIST_NS;
		bpf_map_update_elem(&td_blacklist, p->src, &exp, BPF_ANY);
		td_count(DROPPED);
		return XDP_DROP;
	}
	td_count(PASSED);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
