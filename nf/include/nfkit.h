/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nfkit.h - the header NF authors include. It is the C source of truth of
 * the binary contract described in docs/abi.md: result encoding, the NF
 * signature, the parse-once packet info block, the shared nfkit_* maps,
 * time and randomness, and the conversion of results into hook return
 * codes.
 *
 * Build every NF source once per hook:
 *
 *   clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_XDP    -I nf/include -c f.c -o f.xdp.o
 *   clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_TC     -I nf/include -c f.c -o f.tc.o
 *   clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_SOCKET -I nf/include -c f.c -o f.socket.o
 *
 * Writing an NF:
 *
 *   #include "nfkit.h"
 *
 *   NF(ttl_below, limit)                 // __u64 nf_ttl_below(ctx, limit, _a2, _a3, _a4)
 *   {
 *       struct nf_pkt_info *pi = nf_info(ctx);
 *       if (!pi)
 *           return NF_FAULT;
 *       return pi->ttl < limit;          // a value (0 or 1)
 *   }
 *   NF_EXPORT(ttl_below);                // xdp_ttl_below / tc_... / sock_... and dyn_ttl_below
 *
 * Turning an existing XDP program into an NF takes three lines: rename the
 * entry into an NF, return verdicts instead of XDP codes, export it.
 *
 *   SEC("xdp")                           NF(my_filter)
 *   int my_filter(struct xdp_md *ctx)    {
 *   {                                        ... unchanged body using ctx ...
 *       ... return XDP_DROP;                 return NF_DROP;
 *       ... return XDP_PASS;                 return NF_PASS;   (or a value for the chain)
 *   }                                    }
 *                                        NF_EXPORT(my_filter);
 *
 * The exported xdp_my_filter behaves like the original program; the chain
 * language imports it as `from nf.<file> import my_filter`.
 */
#ifndef NFKIT_H
#define NFKIT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* ------------------------------------------------------------------ */
/* Hook selection: one build per hook, the ctx type is part of the ABI. */

#if defined(NF_HOOK_XDP) + defined(NF_HOOK_TC) + defined(NF_HOOK_SOCKET) != 1
#error "define exactly one of NF_HOOK_XDP, NF_HOOK_TC, NF_HOOK_SOCKET"
#endif

#define NF_HOOKID_XDP 0
#define NF_HOOKID_TC 1
#define NF_HOOKID_SOCKET 2
#define NF_HOOKID_OTHER 3

#if defined(NF_HOOK_XDP)
#define NF_CTX struct xdp_md
#define NF_HOOK_ID NF_HOOKID_XDP
#elif defined(NF_HOOK_TC)
#define NF_CTX struct __sk_buff
#define NF_HOOK_ID NF_HOOKID_TC
#else
#define NF_CTX struct __sk_buff
#define NF_HOOK_ID NF_HOOKID_SOCKET
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* ------------------------------------------------------------------ */
/* Results: values, verdicts, faults (abi.md section 1).
 *
 *   bit 63 = 0                              value (63 bits)
 *   bit 63 = 1, bits 40..62 = 0,
 *           bits 32..39 = action (0..7),
 *           bits 0..31 = argument            verdict
 *   anything else with bit 63 set           fault
 */

#define NF_ACT_ABORTED 0
#define NF_ACT_DROP 1
#define NF_ACT_PASS 2
#define NF_ACT_TX 3
#define NF_ACT_REDIRECT 4
#define NF_ACT_FLOOD 5
#define NF_ACT_CONTROLLER 6
#define NF_ACT_HOST 7
#define NF_ACT_MAX NF_ACT_HOST

#define NF_VERDICT_BIT (1ULL << 63)
#define NF_VERDICT(act, arg) (NF_VERDICT_BIT | ((__u64)(act) << 32) | (__u64)(__u32)(arg))

#define NF_ABORTED NF_VERDICT(NF_ACT_ABORTED, 0)
#define NF_DROP NF_VERDICT(NF_ACT_DROP, 0)
#define NF_PASS NF_VERDICT(NF_ACT_PASS, 0)
#define NF_TX NF_VERDICT(NF_ACT_TX, 0)
#define NF_REDIRECT(ifindex) NF_VERDICT(NF_ACT_REDIRECT, (ifindex))
#define NF_FLOOD NF_VERDICT(NF_ACT_FLOOD, 0)
#define NF_CONTROLLER(reason) NF_VERDICT(NF_ACT_CONTROLLER, (reason))
#define NF_HOST(queue) NF_VERDICT(NF_ACT_HOST, (queue))

/* A plain value: the low 63 bits of v. */
#define NF_VALUE(v) ((__u64)(v) & ~NF_VERDICT_BIT)
/* The canonical fault (bits 40..62 set, so never a verdict). */
#define NF_FAULT (~0ULL)
/* Largest plain value. */
#define NF_VALUE_MAX (~NF_VERDICT_BIT)

/* A well-formed verdict: top bit set, bits 40..62 clear, action <= 7. */
static __always_inline int nf_is_verdict(__u64 r)
{
	return (r >> 32) - 0x80000000ULL <= NF_ACT_MAX;
}
static __always_inline int nf_is_value(__u64 r) { return !(r >> 63); }
static __always_inline int nf_is_fault(__u64 r) { return (r >> 63) && !nf_is_verdict(r); }
static __always_inline __u32 nf_verdict_action(__u64 r) { return (r >> 32) & 0xff; }
static __always_inline __u32 nf_verdict_arg(__u64 r) { return (__u32)r; }

/* ------------------------------------------------------------------ */
/* The parse-once packet info block (abi.md section 3). 72 bytes.
 *
 * The first 40 bytes are the packet's flow key and can be passed directly
 * as a map key (`bpf_map_lookup_elem(&m, pi)`); src..src+32 is the
 * (src, dst) address pair, pi->src alone the source address key.
 * Addresses are 16 bytes: the IPv6 address, or for IPv4 the IPv4-mapped
 * form ::ffff:a.b.c.d (RFC 4291 2.5.5.2), so IPv4 and IPv6 keys never
 * collide and one map serves both. Non-IP packets have all-zero addresses,
 * ports and protocol. Ports are in host order; 0 when the packet has no
 * ports (not TCP/UDP/SCTP, a non-first fragment, or truncated). */
struct nf_pkt_info {
	__u8 src[16];    /*  0 source address (IPv6 or IPv4-mapped) */
	__u8 dst[16];    /* 16 destination address */
	__u16 sport;     /* 32 L4 source port, host order */
	__u16 dport;     /* 34 L4 destination port, host order */
	__u8 l4_proto;   /* 36 IPPROTO_* of the L4 header, 0 if not IP */
	__u8 ip_version; /* 37 4, 6, or 0 when not IP */
	__u16 key_pad;   /* 38 always 0 (end of the flow key) */
	__u64 rand_state;/* 40 xorshift64 state of nf_rand() in pinned mode */
	__u32 pkt_len;   /* 48 packet length in bytes at the hook */
	__u32 ifindex;   /* 52 ingress ifindex */
	__u16 l3_off;    /* 56 offset of the IP header (0 on socket filters) */
	__u16 l4_off;    /* 58 offset of the L4 header, 0 if none was found */
	__u16 eth_proto; /* 60 ethertype after VLAN tags, host order */
	__u16 vlan_id;   /* 62 VID of the outer VLAN tag, 0 if untagged */
	__u8 tos;        /* 64 IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN) */
	__u8 ttl;        /* 65 IPv4 TTL / IPv6 hop limit */
	__u8 tcp_flags;  /* 66 TCP flags byte (FIN 0x01 SYN 0x02 RST 0x04 ACK 0x10) */
	__u8 flags;      /* 67 NF_PI_* */
	__u32 pad;       /* 68 */
};
_Static_assert(sizeof(struct nf_pkt_info) == 72, "nf_pkt_info layout");

#define NF_FLOW_KEY_SIZE 40

#define NF_PI_VALID 0x01 /* the block was filled for this packet */
#define NF_PI_VLAN 0x02  /* the frame had at least one VLAN tag */
#define NF_PI_FRAG 0x04  /* IP fragment (any); ports only on the first */
#define NF_PI_TRUNC 0x08 /* a header was cut short: fields after it are 0 */
#define NF_PI_L4 0x10    /* l4_off points at a complete L4 header */

#define NF_TCP_FIN 0x01
#define NF_TCP_SYN 0x02
#define NF_TCP_RST 0x04
#define NF_TCP_PSH 0x08
#define NF_TCP_ACK 0x10

/* ------------------------------------------------------------------ */
/* Configuration, dynamic frame, classifier entries (abi.md 4, 5, 7). */

struct nf_config {
	__u64 default_action;     /*  0 verdict for unclaimed packets and plain values (not a verdict: PASS) */
	__u64 fault_action;       /*  8 verdict on a fault (not a verdict: DROP) */
	__u32 controller_ifindex; /* 16 */
	__u32 clock_pinned;       /* 20 non-zero: nf_now()/nf_rand() are pinned */
	__u64 now_ns;             /* 24 nf_now() when pinned */
	__u64 rand_seed;          /* 32 seed of nf_rand() when pinned (0: NF_RAND_SEED0) */
};
_Static_assert(sizeof(struct nf_config) == 40, "nf_config layout");

#define NF_RAND_SEED0 0x9e3779b97f4a7c15ULL

struct nf_frame {
	__u64 args[4];    /*   0 arguments of the NF being called */
	__u64 result;     /*  32 its result */
	__u32 cont;       /*  40 nfkit_progs index of the continuation */
	__u32 calls;      /*  44 tail calls so far in this packet */
	__u32 chain_id;   /*  48 the chain being run */
	__u32 pad;        /*  52 */
	__u64 locals[56]; /*  56 the chain's stack slots live across an NF call */
};
_Static_assert(sizeof(struct nf_frame) == 504, "nf_frame layout");

struct nf_cls_entry {
	__u32 chain_id;
	__u32 flags; /* NF_CLS_VALID */
};
#define NF_CLS_VALID 1

struct nf_cls_ip4_key {
	__u32 prefixlen;
	__u8 addr[4];
};
struct nf_cls_ip6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

#define NF_SLOTS 16           /* nfkit_pktinfo / nfkit_frame slots: hook * 4 + depth */
#define NF_PROGS 1024         /* nfkit_progs slots; chain c's entry is slot c */
#define NF_MAX_CHAINS 63      /* chain ids 0..62 */
#define NF_FLOOD_PORTS 64     /* nfkit_flood slots */
#define NF_STATS 1024         /* nfkit_stats entries: (chain_id + 1) * 16 + k */
#define NF_STAT_VALUE 8       /* k for a plain value (default action applied) */
#define NF_STAT_FAULT 9       /* k for a fault */
#define NF_CONTROLLER_TAG 0x6e660000u

/* ------------------------------------------------------------------ */
/* Shared maps. Identical in every object so that linkers merge them by
 * name (abi.md 6); weak so that libbpf's static linker merges them too. */

#define NF__SHARED __attribute__((weak)) SEC(".maps")

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NF_SLOTS);
	__type(key, __u32);
	__type(value, struct nf_pkt_info);
} nfkit_pktinfo NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} nfkit_nest NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nf_config);
} nfkit_config NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nfkit_faults NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NF_STATS);
	__type(key, __u32);
	__type(value, __u64);
} nfkit_stats NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NF_SLOTS);
	__type(key, __u32);
	__type(value, struct nf_frame);
} nfkit_frame NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, NF_PROGS);
	__type(key, __u32);
	__type(value, __u32);
} nfkit_progs NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, NF_FLOOD_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} nfkit_flood NF__SHARED;

#ifdef NF_CLASSIFIER_MAPS
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_cls_ip4_key);
	__type(value, struct nf_cls_entry);
} nfkit_cls_ip4 NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_cls_ip6_key);
	__type(value, struct nf_cls_entry);
} nfkit_cls_ip6 NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u16);
	__type(value, struct nf_cls_entry);
} nfkit_cls_port NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct nf_cls_entry);
} nfkit_cls_dscp NF__SHARED;
#endif

char _license[] __attribute__((weak)) SEC("license") = "Dual MIT/GPL";

/* ------------------------------------------------------------------ */
/* Declaring an NF.
 *
 *   NF(name)                    __u64 nf_name(NF_CTX *ctx, _a1, _a2, _a3, _a4)
 *   NF(name, a)                 ... (ctx, a, _a2, _a3, _a4)
 *   NF(name, a, b, c, d)        ... (ctx, a, b, c, d)
 *
 * Arguments are __u64. Unused slots are named _a1.._a4; tools read the
 * arity from the BTF parameter names (a leading '_' marks an unused slot).
 * noinline + weak keeps all five parameters and the result through clang's
 * dead-argument elimination and constant propagation: a weak function may
 * be replaced at link time, so clang can assume nothing about it. */

#define NF__NARGS(...) NF__NARGS_(_, ##__VA_ARGS__, 4, 3, 2, 1, 0)
#define NF__NARGS_(_0, _1, _2, _3, _4, N, ...) N
#define NF__CAT(a, b) NF__CAT_(a, b)
#define NF__CAT_(a, b) a##b
#define NF__P0() __u64 _a1, __u64 _a2, __u64 _a3, __u64 _a4
#define NF__P1(a) __u64 a, __u64 _a2, __u64 _a3, __u64 _a4
#define NF__P2(a, b) __u64 a, __u64 b, __u64 _a3, __u64 _a4
#define NF__P3(a, b, c) __u64 a, __u64 b, __u64 c, __u64 _a4
#define NF__P4(a, b, c, d) __u64 a, __u64 b, __u64 c, __u64 d

#define NF_FUNC __attribute__((noinline, weak))
#define NF(name, ...) \
	NF_FUNC __u64 nf_##name(NF_CTX *ctx, NF__CAT(NF__P, NF__NARGS(__VA_ARGS__))(__VA_ARGS__))

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

static __always_inline __u64 nf_now(void)
{
	struct nf_config *c = nf_config();
	if (c && c->clock_pinned)
		return c->now_ns;
	return bpf_ktime_get_ns();
}

/* 32 random bits. Pinned: x ^= x << 13; x ^= x >> 7; x ^= x << 17 on the
 * info block's rand_state, result = the high 32 bits of the new state. */
static __always_inline __u32 nf_rand(void)
{
	struct nf_config *c = nf_config();
	if (c && c->clock_pinned) {
		struct nf_pkt_info *pi = nf_info((NF_CTX *)0);
		if (pi) {
			__u64 x = pi->rand_state;
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			pi->rand_state = x;
			return (__u32)(x >> 32);
		}
	}
	return bpf_get_prandom_u32();
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
 * headers), TCP / UDP / SCTP ports and TCP flags. Keeps rand_state. */

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
	__u64 rs = pi->rand_state;
	__u32 off = 0;
	__u16 proto;
	__u8 l4 = 0;

	__builtin_memset(pi, 0, sizeof(*pi));
	pi->rand_state = rs;
	pi->flags = NF_PI_VALID;
#if NF_HOOK_ID == NF_HOOKID_XDP
	pi->pkt_len = ctx->data_end - ctx->data;
	pi->ifindex = ctx->ingress_ifindex;
	{
		struct ethhdr eb, *eth = nf__hdr(ctx, 0, &eb);
		if (!eth) {
			pi->flags |= NF_PI_TRUNC;
			return 0;
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
			pi->flags |= NF_PI_TRUNC;
			return 0;
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
			pi->flags |= NF_PI_TRUNC;
			pi->eth_proto = bpf_ntohs(proto);
			return 0;
		}
		if (!(pi->flags & NF_PI_VLAN))
			pi->vlan_id = bpf_ntohs(vh->tci) & 0x0fff;
		pi->flags |= NF_PI_VLAN;
		proto = vh->proto;
		off += sizeof(struct nf__vlan);
	}
#endif
	pi->eth_proto = bpf_ntohs(proto);
	pi->l3_off = off;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ib, *ip = nf__hdr(ctx, off, &ib);
		if (!ip || ip->version != 4 || ip->ihl < 5) {
			pi->flags |= NF_PI_TRUNC;
			return 0;
		}
		pi->ip_version = 4;
		pi->tos = ip->tos;
		pi->ttl = ip->ttl;
		nf__map4(pi->src, ip->saddr);
		nf__map4(pi->dst, ip->daddr);
		l4 = ip->protocol;
		pi->l4_proto = l4;
		if (ip->frag_off & bpf_htons(0x3fff)) {
			pi->flags |= NF_PI_FRAG;
			if (ip->frag_off & bpf_htons(0x1fff))
				return 0; /* not the first fragment: no L4 header */
		}
		off += ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ib, *ip6 = nf__hdr(ctx, off, &ib);
		if (!ip6 || ip6->version != 6) {
			pi->flags |= NF_PI_TRUNC;
			return 0;
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
				pi->flags |= NF_PI_TRUNC;
				pi->l4_proto = l4;
				return 0;
			}
			if (l4 == IPPROTO_FRAGMENT) {
				pi->flags |= NF_PI_FRAG;
				if (e->frag & bpf_htons(0xfff8)) {
					pi->l4_proto = e->nexthdr;
					return 0;
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
		return 0;
	}
	if (off > 0x7ff) { /* keeps offsets in the verifier's packet range */
		pi->flags |= NF_PI_TRUNC;
		return 0;
	}
	if (l4 == IPPROTO_TCP) {
		struct nf__tcp tb, *t = nf__hdr(ctx, off, &tb);
		if (!t) {
			pi->flags |= NF_PI_TRUNC;
			return 0;
		}
		pi->sport = bpf_ntohs(t->sport);
		pi->dport = bpf_ntohs(t->dport);
		pi->tcp_flags = t->flags;
		pi->l4_off = off;
		pi->flags |= NF_PI_L4;
	} else if (l4 == IPPROTO_UDP || l4 == IPPROTO_SCTP) {
		struct { __be16 sport; __be16 dport; __u32 w1; } ub, *u = nf__hdr(ctx, off, &ub);
		if (!u) {
			pi->flags |= NF_PI_TRUNC;
			return 0;
		}
		pi->sport = bpf_ntohs(u->sport);
		pi->dport = bpf_ntohs(u->dport);
		pi->l4_off = off;
		pi->flags |= NF_PI_L4;
	} else {
		pi->l4_off = off;
	}
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

/* ------------------------------------------------------------------ */
/* Results into hook return codes (the table of abi.md section 1). */

static __always_inline void nf__count_fault(void)
{
	__u32 k = 0;
	__u64 *f = bpf_map_lookup_elem(&nfkit_faults, &k);
	if (f)
		*f += 1;
}

/* The verdict a result stands for: a verdict itself; a plain value gives
 * the default action; a fault the fault action (and counts the fault). */
static __always_inline __u64 nf_resolve(__u64 r)
{
	struct nf_config *c;
	__u64 v;
	if (nf_is_verdict(r))
		return r;
	c = nf_config();
	if (nf_is_value(r)) {
		v = c ? c->default_action : 0;
		return nf_is_verdict(v) ? v : NF_PASS;
	}
	nf__count_fault();
	v = c ? c->fault_action : 0;
	return nf_is_verdict(v) ? v : NF_DROP;
}

#if NF_HOOK_ID == NF_HOOKID_XDP
static __always_inline int nf_action(NF_CTX *ctx, __u64 r)
{
	__u64 v = nf_resolve(r);
	__u32 arg = nf_verdict_arg(v);
	switch (nf_verdict_action(v)) {
	case NF_ACT_DROP:
		return XDP_DROP;
	case NF_ACT_PASS:
	case NF_ACT_HOST:
		return XDP_PASS;
	case NF_ACT_TX:
		return XDP_TX;
	case NF_ACT_REDIRECT:
		return bpf_redirect(arg, 0);
	case NF_ACT_FLOOD:
		return bpf_redirect_map(&nfkit_flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	case NF_ACT_CONTROLLER:
		if (bpf_xdp_adjust_meta(ctx, -4) == 0) {
			void *meta = (void *)(long)ctx->data_meta;
			void *data = (void *)(long)ctx->data;
			if (meta + 4 <= data)
				*(__u32 *)meta = NF_CONTROLLER_TAG | (arg & 0xffff);
		}
		return XDP_PASS;
	default:
		return XDP_ABORTED;
	}
}
#elif NF_HOOK_ID == NF_HOOKID_TC
static __always_inline int nf_action(NF_CTX *ctx, __u64 r)
{
	__u64 v = nf_resolve(r);
	__u32 arg = nf_verdict_arg(v);
	switch (nf_verdict_action(v)) {
	case NF_ACT_PASS:
	case NF_ACT_HOST:
		return TC_ACT_OK;
	case NF_ACT_TX:
		return bpf_redirect(ctx->ingress_ifindex ? ctx->ingress_ifindex : ctx->ifindex, 0);
	case NF_ACT_REDIRECT:
		return bpf_redirect(arg, 0);
	case NF_ACT_FLOOD: {
		__u32 in = ctx->ingress_ifindex ? ctx->ingress_ifindex : ctx->ifindex;
		for (__u32 i = 0; i < NF_FLOOD_PORTS; i++) {
			__u32 key = i; /* i itself stays in a register: a bounded loop */
			__u32 *port = bpf_map_lookup_elem(&nfkit_flood, &key);
			if (port && *port && *port != in)
				bpf_clone_redirect(ctx, *port, 0);
		}
		return TC_ACT_SHOT;
	}
	case NF_ACT_CONTROLLER:
		ctx->mark = NF_CONTROLLER_TAG | (arg & 0xffff);
		return TC_ACT_OK;
	default: /* ABORTED, DROP */
		return TC_ACT_SHOT;
	}
}
#else
static __always_inline int nf_action(NF_CTX *ctx, __u64 r)
{
	__u32 act = nf_verdict_action(nf_resolve(r));
	return (act == NF_ACT_ABORTED || act == NF_ACT_DROP) ? 0 : ctx->len;
}
#endif

/* Count a chain's result in nfkit_stats (abi.md 8), leave the slot, and
 * turn the result into the hook's return code. chain_id (__u32)-1 is the
 * "no chain claimed the packet" row. */
static __always_inline int nf_finish(NF_CTX *ctx, __u32 chain_id, __u64 r)
{
	__u32 k = nf_is_verdict(r) ? nf_verdict_action(r) : nf_is_value(r) ? NF_STAT_VALUE : NF_STAT_FAULT;
	__u32 idx = (chain_id + 1) * 16 + k;
	__u64 *s = bpf_map_lookup_elem(&nfkit_stats, &idx);
	if (s)
		*s += 1;
	nf_leave();
	return nf_action(ctx, r);
}

/* ------------------------------------------------------------------ */
/* Exports. NF_EXPORT(name) gives, for the hook being built, the
 * standalone program <hook>_<name> (xdp_, tc_, sock_) and the dynamic
 * entry dyn_<name>. The standalone program takes its arguments from
 * nf_args (.rodata, set by the loader before load). */

static const volatile __u64 nf_args[4] __attribute__((unused)) = {0, 0, 0, 0};

#define NF__EXPORT_STANDALONE(sec, prefix, name)                              \
	SEC(sec) int prefix##name(NF_CTX *ctx)                                \
	{                                                                     \
		if (!nf_enter(ctx))                                           \
			return nf_action(ctx, NF_FAULT);                      \
		__u64 r_ = nf_##name(ctx, nf_args[0], nf_args[1], nf_args[2], nf_args[3]); \
		nf_leave();                                                   \
		return nf_action(ctx, r_);                                    \
	}

/* Dynamic entry (abi.md 5): arguments from the frame; a verdict or fault
 * ends the chain at once; a value goes to frame->result and the
 * continuation frame->cont is tail-called (a failed tail call is a
 * fault). */
#define NF__EXPORT_DYN(sec, name)                                             \
	SEC(sec) int dyn_##name(NF_CTX *ctx)                                  \
	{                                                                     \
		__u32 slot_ = nf__slot();                                     \
		struct nf_frame *f_ = bpf_map_lookup_elem(&nfkit_frame, &slot_); \
		if (!f_)                                                      \
			return nf_finish(ctx, (__u32)-1, NF_FAULT);           \
		__u64 r_ = nf_##name(ctx, f_->args[0], f_->args[1], f_->args[2], f_->args[3]); \
		if (r_ >> 63)                                                 \
			return nf_finish(ctx, f_->chain_id, r_);              \
		f_->result = r_;                                              \
		f_->calls += 1;                                               \
		bpf_tail_call(ctx, &nfkit_progs, f_->cont);                   \
		return nf_finish(ctx, f_->chain_id, NF_FAULT);                \
	}

#if NF_HOOK_ID == NF_HOOKID_XDP
#define NF_EXPORT_XDP(name) NF__EXPORT_STANDALONE("xdp", xdp_, name)
#define NF_EXPORT_DYN_XDP(name) NF__EXPORT_DYN("xdp", name)
#else
#define NF_EXPORT_XDP(name)
#define NF_EXPORT_DYN_XDP(name)
#endif
#if NF_HOOK_ID == NF_HOOKID_TC
#define NF_EXPORT_TC(name) NF__EXPORT_STANDALONE("tc", tc_, name)
#define NF_EXPORT_DYN_TC(name) NF__EXPORT_DYN("tc", name)
#else
#define NF_EXPORT_TC(name)
#define NF_EXPORT_DYN_TC(name)
#endif
#if NF_HOOK_ID == NF_HOOKID_SOCKET
#define NF_EXPORT_SOCKET(name) NF__EXPORT_STANDALONE("socket", sock_, name)
#define NF_EXPORT_DYN_SOCKET(name) NF__EXPORT_DYN("socket", name)
#else
#define NF_EXPORT_SOCKET(name)
#define NF_EXPORT_DYN_SOCKET(name)
#endif

/* Both exports of `name` for the hook being built. */
#define NF_EXPORT(name)                                                       \
	NF_EXPORT_XDP(name) NF_EXPORT_TC(name) NF_EXPORT_SOCKET(name)         \
	NF_EXPORT_DYN_XDP(name) NF_EXPORT_DYN_TC(name) NF_EXPORT_DYN_SOCKET(name) \
	_Static_assert(1, "")

#endif /* NFKIT_H */
