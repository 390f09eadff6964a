/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nfkit/parse.h - the packet side of an NF: the current packet's info
 * block and configuration, time and randomness (nf_now, nf_rand),
 * bounds-checked header access (nf__hdr), the parse-once parser, and a
 * hook program's entry and exit (nf_enter, nf_leave). Included by nfkit.h.
 */
#ifndef NFKIT_PARSE_H
#define NFKIT_PARSE_H

#include "abi.h"

/* ------------------------------------------------------------------ */
/* The info block of the current packet. */

static __always_inline __u32 nf__slot(void)
{
#if NF_HOOK_ID == NF_HOOKID_XDP
	return 0;
#else
	__u32 h = NF_HOOK_ID;
	__u32 *d = bpf_map_lookup_elem(&nfkit_nest, &h);
	__u32 depth = (d && *d) ? *d - 1 : 0;
	if (depth > 3)
		depth = 3;
	return NF_HOOK_ID * 4 + depth;
#endif
}

/* The current packet's info block; NULL only if the map is missing, which
 * an NF reports as NF_FAULT. `ctx` is unused (the slot depends on the hook
 * and nesting depth) but kept so call sites read naturally. */
static __always_inline struct nf_pkt_info *nf_info(NF_CTX *ctx)
{
	__u32 s = nf__slot();
	(void)ctx;
	return bpf_map_lookup_elem(&nfkit_pktinfo, &s);
}

static __always_inline struct nf_config *nf_config(void)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(&nfkit_config, &k);
}

/* ------------------------------------------------------------------ */
/* Time and randomness (abi.md 7). */

/* The clock is read at most once per packet: the first nf_now() keeps
 * its value in the info block (now_ns, flag NF_PI_NOW), later ones of the
 * same packet return it. nf_enter clears the flag and, when the clock is
 * pinned, stores the pinned time at once. */
static __always_inline __u64 nf_now(void)
{
	struct nf_pkt_info *pi = nf_info((NF_CTX *)0);
	struct nf_config *c;
	__u64 t;

	if (pi && (pi->flags & NF_PI_NOW))
		return pi->now_ns;
	c = nf_config();
	if (c && c->clock_pinned == NF_CLOCK_PINNED)
		t = c->now_ns;
	else
		t = bpf_ktime_get_ns();
	if (pi) {
		pi->now_ns = t;
		pi->flags |= NF_PI_NOW;
	}
	return t;
}

/* 32 random bits from a xorshift64 sequence kept in the info block
 * (rand_state; x ^= x << 13; x ^= x >> 7; x ^= x << 17, result = the high
 * 32 bits of the new state). Pinned (nf_config.clock_pinned != 0): the
 * sequence starts at the configured seed (nf_enter). Real: the first call
 * of a packet returns bpf_get_prandom_u32() r and starts the packet's
 * sequence at NF_RAND_SEED0 ^ r << 32 (flag NF_PI_RAND), so the helper
 * runs at most once per packet. */
static __always_inline __u32 nf_rand(void)
{
	struct nf_pkt_info *pi = nf_info((NF_CTX *)0);
	__u64 x;

	if (!pi)
		return bpf_get_prandom_u32();
	if (!(pi->flags & NF_PI_RAND)) {
		struct nf_config *c = nf_config();
		if (!c || !c->clock_pinned) {
			__u32 r = bpf_get_prandom_u32();
			pi->rand_state = NF_RAND_SEED0 ^ ((__u64)r << 32);
			pi->flags |= NF_PI_RAND;
			return r;
		}
	}
	x = pi->rand_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	pi->rand_state = x;
	return (__u32)(x >> 32);
}

/* ------------------------------------------------------------------ */
/* Packet access. nf__hdr(ctx, off, buf) returns a pointer to
 * sizeof(*buf) readable bytes at `off`, or NULL when the packet is too
 * short. XDP and TC point into the packet (TC copies into *buf through
 * bpf_skb_load_bytes when the bytes are not in the linear area); socket
 * filters always copy (offset 0 = network header). */

/* Hides a pointer's origin from the compiler. Without it clang folds
 * `!p` for p = (void *)(long)skb->data into a 32-bit test of the u32
 * field, which only works while the packet's address has non-zero low 32
 * bits (true in the kernel, not a guarantee elsewhere, e.g. in a VM). */
#define nf__opaque(p) asm volatile("" : "+r"(p))

#if NF_HOOK_ID == NF_HOOKID_XDP
#define NF__DATA(ctx) ((void *)(long)(ctx)->data)
#define NF__DATA_END(ctx) ((void *)(long)(ctx)->data_end)
#define nf__hdr(ctx, off, buf) ({                                             \
	void *p_ = NF__DATA(ctx) + (off);                                     \
	typeof(buf) r_ = (p_ + sizeof(*(buf)) <= NF__DATA_END(ctx)) ? (typeof(buf))p_ : (typeof(buf))0; \
	nf__opaque(r_);                                                       \
	r_; })
#elif NF_HOOK_ID == NF_HOOKID_TC
#define NF__DATA(ctx) ((void *)(long)(ctx)->data)
#define NF__DATA_END(ctx) ((void *)(long)(ctx)->data_end)
#define nf__hdr(ctx, off, buf) ({                                             \
	void *p_ = NF__DATA(ctx) + (off);                                     \
	typeof(buf) r_ = (typeof(buf))0;                                      \
	if (p_ + sizeof(*(buf)) <= NF__DATA_END(ctx))                         \
		r_ = (typeof(buf))p_;                                         \
	else if (bpf_skb_load_bytes(ctx, (off), (buf), sizeof(*(buf))) == 0)  \
		r_ = (buf);                                                   \
	nf__opaque(r_);                                                       \
	r_; })
#else
#define nf__hdr(ctx, off, buf) \
	(bpf_skb_load_bytes_relative(ctx, (off), (buf), sizeof(*(buf)), BPF_HDR_START_NET) == 0 ? (buf) : (typeof(buf))0)
#endif

/* ------------------------------------------------------------------ */
/* The parser: L2, up to two VLAN tags, IPv4 / IPv6 (up to 6 extension
 * headers), TCP / UDP / SCTP ports and TCP flags. Keeps rand_state (with
 * NF_PI_RAND) and the packet's time (now_ns with NF_PI_NOW). */

struct nf__vlan { __be16 tci; __be16 proto; };
struct nf__tcp { __be16 sport; __be16 dport; __u32 seq; __u32 ack; __u8 doff; __u8 flags; __u16 win; __u16 csum; __u16 urg; };
struct nf__ext { __u8 nexthdr; __u8 len; __be16 frag; };

/* ::ffff:a.b.c.d */
static __always_inline void nf__map4(__u8 *dst, __be32 a)
{
	__u32 *d = (__u32 *)dst;
	d[0] = 0;
	d[1] = 0;
	d[2] = bpf_htonl(0x0000ffff);
	d[3] = a;
}

static __always_inline int nf_parse(NF_CTX *ctx, struct nf_pkt_info *pi)
{
	__u64 rs = pi->rand_state, now = pi->now_ns;
	__u8 keep = pi->flags & (NF_PI_NOW | NF_PI_RAND);
	__u32 off = 0;
	__u16 proto;
	__u8 l4 = 0;

	/* The flags are gathered in a register and stored once, at the end. */
	__u8 fl = NF_PI_VALID | keep;

	__builtin_memset(pi, 0, sizeof(*pi));
	pi->rand_state = rs;
	pi->now_ns = now;
#if NF_HOOK_ID == NF_HOOKID_XDP
	pi->pkt_len = ctx->data_end - ctx->data;
	pi->ifindex = ctx->ingress_ifindex;
	{
		struct ethhdr eb, *eth = nf__hdr(ctx, 0, &eb);
		if (!eth) {
			fl |= NF_PI_TRUNC;
			goto out;
		}
		proto = eth->h_proto;
		off = sizeof(struct ethhdr);
	}
#elif NF_HOOK_ID == NF_HOOKID_TC
	pi->pkt_len = ctx->len;
	pi->ifindex = ctx->ingress_ifindex ? ctx->ingress_ifindex : ctx->ifindex;
	{
		struct ethhdr eb, *eth = nf__hdr(ctx, 0, &eb);
		if (!eth) {
			fl |= NF_PI_TRUNC;
			goto out;
		}
		proto = eth->h_proto;
		off = sizeof(struct ethhdr);
	}
#else
	pi->pkt_len = ctx->len;
	pi->ifindex = ctx->ifindex;
	proto = (__u16)ctx->protocol;
#endif
#if NF_HOOK_ID != NF_HOOKID_SOCKET
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		struct nf__vlan vb, *vh = nf__hdr(ctx, off, &vb);
		if (!vh) {
			fl |= NF_PI_TRUNC;
			pi->eth_proto = bpf_ntohs(proto);
			goto out;
		}
		if (!(fl & NF_PI_VLAN))
			pi->vlan_id = bpf_ntohs(vh->tci) & 0x0fff;
		fl |= NF_PI_VLAN;
		proto = vh->proto;
		off += sizeof(struct nf__vlan);
	}
#endif
	pi->eth_proto = bpf_ntohs(proto);
	pi->l3_off = off;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ib, *ip = nf__hdr(ctx, off, &ib);
		if (!ip || ip->version != 4 || ip->ihl < 5) {
			fl |= NF_PI_TRUNC;
			goto out;
		}
		pi->ip_version = 4;
		pi->tos = ip->tos;
		pi->ttl = ip->ttl;
		nf__map4(pi->src, ip->saddr);
		nf__map4(pi->dst, ip->daddr);
		l4 = ip->protocol;
		pi->l4_proto = l4;
		if (ip->frag_off & bpf_htons(0x3fff)) {
			fl |= NF_PI_FRAG;
			if (ip->frag_off & bpf_htons(0x1fff))
				goto out; /* not the first fragment: no L4 header */
		}
		off += ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ib, *ip6 = nf__hdr(ctx, off, &ib);
		if (!ip6 || ip6->version != 6) {
			fl |= NF_PI_TRUNC;
			goto out;
		}
		pi->ip_version = 6;
		pi->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
		pi->ttl = ip6->hop_limit;
		__builtin_memcpy(pi->src, &ip6->saddr, 16);
		__builtin_memcpy(pi->dst, &ip6->daddr, 16);
		l4 = ip6->nexthdr;
		off += sizeof(struct ipv6hdr);
#pragma unroll
		for (int i = 0; i < 6; i++) {
			if (l4 != IPPROTO_HOPOPTS && l4 != IPPROTO_ROUTING && l4 != IPPROTO_DSTOPTS &&
			    l4 != IPPROTO_FRAGMENT && l4 != IPPROTO_AH)
				break;
			struct nf__ext eb, *e = nf__hdr(ctx, off, &eb);
			if (!e) {
				fl |= NF_PI_TRUNC;
				pi->l4_proto = l4;
				goto out;
			}
			if (l4 == IPPROTO_FRAGMENT) {
				fl |= NF_PI_FRAG;
				if (e->frag & bpf_htons(0xfff8)) {
					pi->l4_proto = e->nexthdr;
					goto out;
				}
				off += 8;
			} else if (l4 == IPPROTO_AH) {
				off += ((__u32)e->len + 2) * 4;
			} else {
				off += ((__u32)e->len + 1) * 8;
			}
			l4 = e->nexthdr;
		}
		pi->l4_proto = l4;
	} else {
		goto out;
	}
	if (off > 0x7ff) { /* keeps offsets in the verifier's packet range */
		fl |= NF_PI_TRUNC;
		goto out;
	}
	if (l4 == IPPROTO_TCP) {
		struct nf__tcp tb, *t = nf__hdr(ctx, off, &tb);
		if (!t) {
			fl |= NF_PI_TRUNC;
			goto out;
		}
		pi->sport = bpf_ntohs(t->sport);
		pi->dport = bpf_ntohs(t->dport);
		pi->tcp_flags = t->flags;
		pi->l4_off = off;
		fl |= NF_PI_L4;
	} else if (l4 == IPPROTO_UDP || l4 == IPPROTO_SCTP) {
		struct { __be16 sport; __be16 dport; __u32 w1; } ub, *u = nf__hdr(ctx, off, &ub);
		if (!u) {
			fl |= NF_PI_TRUNC;
			goto out;
		}
		pi->sport = bpf_ntohs(u->sport);
		pi->dport = bpf_ntohs(u->dport);
		pi->l4_off = off;
		fl |= NF_PI_L4;
	} else {
		pi->l4_off = off;
	}
out:
	pi->flags = fl;
	return 0;
}

/* Parse the current packet again into its slot (after an NF rewrote
 * headers or moved the packet start). Keeps the rand state. */
static __always_inline struct nf_pkt_info *nf_reparse(NF_CTX *ctx)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (pi)
		nf_parse(ctx, pi);
	return pi;
}

/* ------------------------------------------------------------------ */
/* Entry and exit of a hook program: take the slot, parse; give it back. */

static __always_inline struct nf_pkt_info *nf_enter(NF_CTX *ctx)
{
	__u32 slot = 0;
#if NF_HOOK_ID != NF_HOOKID_XDP
	__u32 h = NF_HOOK_ID;
	__u32 *d = bpf_map_lookup_elem(&nfkit_nest, &h);
	if (d) {
		__u32 depth = *d;
		*d = depth + 1;
		slot = NF_HOOK_ID * 4 + (depth > 3 ? 3 : depth);
	} else {
		slot = NF_HOOK_ID * 4;
	}
#endif
	struct nf_pkt_info *pi = bpf_map_lookup_elem(&nfkit_pktinfo, &slot);
	if (!pi)
		return 0;
	struct nf_config *c = nf_config();
	pi->rand_state = (c && c->rand_seed) ? c->rand_seed : NF_RAND_SEED0;
	/* A new packet: its time is not read yet, or is the pinned time. */
	pi->flags = 0;
	if (c && c->clock_pinned == NF_CLOCK_PINNED) {
		pi->now_ns = c->now_ns;
		pi->flags = NF_PI_NOW;
	}
	nf_parse(ctx, pi);
	return pi;
}

static __always_inline void nf_leave(void)
{
#if NF_HOOK_ID != NF_HOOKID_XDP
	__u32 h = NF_HOOK_ID;
	__u32 *d = bpf_map_lookup_elem(&nfkit_nest, &h);
	if (d && *d)
		*d -= 1;
#endif
}

#endif /* NFKIT_PARSE_H */
