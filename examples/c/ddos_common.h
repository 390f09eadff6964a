/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The DDoS logic of examples/ddos.py shared by its two hand-written
 * forms: examples/c/ddos.c (one XDP program) and
 * crates/nfkit-bench/c/ddos_tail.c (a tail-call pipeline). Constants,
 * maps, parsing, token buckets and sampling are defined here once, so
 * the two differ only in how the steps are joined.
 *
 * Buckets count 10^-9 tokens, start full and gain elapsed_ns * rate.
 * Addresses are 16 bytes (IPv4 as ::ffff:a.b.c.d), non-IP packets have
 * the all-zero address, as in nfkit's NFs. Parsing covers untagged
 * Ethernet, IPv4 and IPv6 without extension headers (nfkit's parser also
 * walks VLAN tags and IPv6 extension headers).
 *
 * The clock is the includer's: it passes `now` to the helpers.
 */
#ifndef NFKIT_DDOS_COMMON_H
#define NFKIT_DDOS_COMMON_H

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

struct addr {
	__u8 b[16];
};

struct pair {
	__u8 src[16];
	__u8 dst[16];
};

/* The flow of a packet; src and dst together are its struct pair. */
struct flow {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct sample_key {
	struct flow flow;
	__u64 n;
};

struct bucket {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 tokens; /* 10^-9 tokens */
	__u64 last_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct addr);
	__type(value, __u64);
} blacklist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sample_key);
	__type(value, __u64);
} sampled SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct addr);
	__type(value, struct bucket);
} dst_buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct pair);
	__type(value, struct bucket);
} pair_buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &what);
	if (c)
		__sync_fetch_and_add(c, 1);
}

/* 1 when the bucket had a whole token (and took it), else 0. */
static __always_inline int take(void *map, void *key, __u64 rate, __u64 burst, __u64 now)
{
	__u64 full = burst * UNIT, elapsed, room;
	struct bucket *b = bpf_map_lookup_elem(map, key);
	int ok;

	if (!b) {
		struct bucket nb = { .tokens = full, .last_ns = now };
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

/* The flow of the packet (addresses, ports of TCP/UDP, protocol) into a
 * zeroed `f`; fields it cannot read stay 0. */
static __always_inline void parse(struct xdp_md *ctx, struct flow *f)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l4h = 0;
	__u32 *a;

	if ((void *)(eth + 1) > end)
		return;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5)
			return;
		a = (__u32 *)f->src;
		a[2] = bpf_htonl(0xffff);
		a[3] = ip->saddr;
		a = (__u32 *)f->dst;
		a[2] = bpf_htonl(0xffff);
		a[3] = ip->daddr;
		f->proto = ip->protocol;
		if (!(ip->frag_off & bpf_htons(0x1fff)))
			l4h = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->version != 6)
			return;
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		__builtin_memcpy(f->dst, &ip6->daddr, 16);
		f->proto = ip6->nexthdr;
		l4h = ip6 + 1;
	}
	/* Ports of a complete UDP (8 bytes) or TCP (20 bytes) header. */
	if (l4h && ((f->proto == IPPROTO_UDP && l4h + 8 <= end) ||
		    (f->proto == IPPROTO_TCP && l4h + 20 <= end))) {
		__be16 *ports = l4h;
		f->sport = bpf_ntohs(ports[0]);
		f->dport = bpf_ntohs(ports[1]);
	}
}

/* Packet number 1, SAMPLE + 1, 2 * SAMPLE + 1, ... of the flow. */
static __always_inline int one_in(struct flow *f)
{
	struct sample_key k = { .n = SAMPLE };
	__u64 *seen, one = 1;

	k.flow = *f;
	seen = bpf_map_lookup_elem(&sampled, &k);
	if (!seen) {
		if (bpf_map_update_elem(&sampled, &k, &one, BPF_NOEXIST) == 0)
			return 1;
		seen = bpf_map_lookup_elem(&sampled, &k);
		if (!seen)
			return 0;
	}
	return __sync_fetch_and_add(seen, 1) % SAMPLE == 0;
}

/* The blacklist step: for a source blacklisted until after `now`, the
 * action (bpf_redirect to COLLECTOR for one packet in SAMPLE of its flow,
 * else XDP_DROP), counted; -1 when the source is not blacklisted. */
static __always_inline int blacklisted(struct flow *f, __u64 now)
{
	__u64 *exp = bpf_map_lookup_elem(&blacklist, f->src);

	if (!exp || now >= *exp)
		return -1;
	if (one_in(f)) {
		count(REDIRECTED);
		return bpf_redirect(COLLECTOR, 0);
	}
	count(DROPPED);
	return XDP_DROP;
}

/* The pair step, after the destination's bucket was empty: the pair's
 * bucket passes the packet when it has a token, else the source is
 * blacklisted for BLACKLIST_NS and the packet dropped; counted. */
static __always_inline int pair_step(struct flow *f, __u64 now)
{
	if (!take(&pair_buckets, f->src, PAIR_RATE, PAIR_BURST, now)) {
		__u64 until = now + BLACKLIST_NS;
		bpf_map_update_elem(&blacklist, f->src, &until, BPF_ANY);
		count(DROPPED);
		return XDP_DROP;
	}
	count(PASSED);
	return XDP_PASS;
}

#endif
