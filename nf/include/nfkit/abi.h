/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nfkit/abi.h - the layouts and constants of nfkit's binary contract
 * (docs/abi.md): hooks, result encoding, the packet info block, the
 * configuration, the dynamic call frame, classifier entries, sizes, and
 * the maps every NF object shares by name. Its Rust twin is the
 * nfkit-abi crate; a test checks one against the other through BTF.
 * Included by nfkit.h; NF sources include nfkit.h.
 */
#ifndef NFKIT_ABI_H
#define NFKIT_ABI_H

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

#if defined(NF_HOOK_XDP) + defined(NF_HOOK_TC) + defined(NF_HOOK_SOCKET) + defined(NF_HOOK_SWITCH) != 1
#error "define exactly one of NF_HOOK_XDP, NF_HOOK_TC, NF_HOOK_SOCKET, NF_HOOK_SWITCH"
#endif

#define NF_HOOKID_XDP 0
#define NF_HOOKID_TC 1
#define NF_HOOKID_SOCKET 2
#define NF_HOOKID_OTHER 3
/* The same ids for BTF (the macros serve #if). */
enum nf_hook_id {
	NF_HOOK_ID_OF_XDP = NF_HOOKID_XDP,
	NF_HOOK_ID_OF_TC = NF_HOOKID_TC,
	NF_HOOK_ID_OF_SOCKET = NF_HOOKID_SOCKET,
	NF_HOOK_ID_OF_OTHER = NF_HOOKID_OTHER,
};

#if defined(NF_HOOK_XDP)
#define NF_CTX struct xdp_md
#define NF_HOOK_ID NF_HOOKID_XDP
#elif defined(NF_HOOK_SWITCH)
/* nfkit's software switch: an XDP context (NFs are the XDP builds, the
 * info block uses XDP's slot); entry programs return the resolved
 * verdict (abi.md 1) instead of an XDP return code. */
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

enum nf_action {
	NF_ACT_ABORTED = 0,
	NF_ACT_DROP = 1,
	NF_ACT_PASS = 2,
	NF_ACT_TX = 3,
	NF_ACT_REDIRECT = 4,
	NF_ACT_FLOOD = 5,
	NF_ACT_CONTROLLER = 6,
	NF_ACT_HOST = 7,
	NF_ACT_MAX = NF_ACT_HOST,
};

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
	__u64 rand_state;/* 40 xorshift64 state of nf_rand() */
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
	__u64 now_ns;    /* 72 nf_now() of this packet once read (NF_PI_NOW) */
};
_Static_assert(sizeof(struct nf_pkt_info) == 80, "nf_pkt_info layout");

enum nf_pi_flag {
	NF_PI_VALID = 0x01, /* the block was filled for this packet */
	NF_PI_VLAN = 0x02,  /* the frame had at least one VLAN tag */
	NF_PI_FRAG = 0x04,  /* IP fragment (any); ports only on the first */
	NF_PI_TRUNC = 0x08, /* a header was cut short: fields after it are 0 */
	NF_PI_L4 = 0x10,    /* l4_off points at a complete L4 header */
	NF_PI_NOW = 0x20,   /* now_ns holds nf_now() for this packet */
	NF_PI_RAND = 0x40,  /* rand_state holds this packet's nf_rand() sequence (real mode) */
};

enum nf_tcp_flag {
	NF_TCP_FIN = 0x01,
	NF_TCP_SYN = 0x02,
	NF_TCP_RST = 0x04,
	NF_TCP_PSH = 0x08,
	NF_TCP_ACK = 0x10,
};

/* ------------------------------------------------------------------ */
/* Configuration, dynamic frame, classifier entries (abi.md 4, 5, 7). */

/* Sizes and slots (abi.md 3, 5, 8). */
enum nf_limit {
	NF_SLOTS = 16,           /* nfkit_pktinfo / nfkit_frame slots: hook * 4 + depth */
	NF_DEPTHS = 4,           /* nesting depths per hook in those slots */
	NF_PROGS = 1024,         /* nfkit_progs slots; chain c's entry is slot c */
	NF_MAX_CHAINS = 63,      /* chain ids 0..62 */
	NF_FLOOD_PORTS = 64,     /* nfkit_flood slots */
	NF_STATS = 1024,         /* nfkit_stats entries: (chain_id + 1) * 16 + k */
	NF_FLOW_KEY_SIZE = 40,   /* the flow key at the start of nf_pkt_info */
	NF_FRAME_LOCALS = 56,    /* nf_frame.locals */
	NF_CLS_ENTRIES = 4096,   /* nfkit_cls_ip4/ip6/port entries */
	NF_CLS_DSCP_ENTRIES = 64,
	NF_CONTROLLER_TAG = 0x6e660000, /* CONTROLLER's tag: tag | reason */
};

/* Columns k of nfkit_stats: verdict actions 0..7, then these. */
enum nf_stat_col {
	NF_STAT_VALUE = 8,      /* a plain value (default action applied) */
	NF_STAT_FAULT = 9,      /* a fault */
	NF_STAT_PER_CHAIN = 16, /* columns per chain slot */
};

struct nf_config {
	__u64 default_action;     /*  0 verdict for unclaimed packets and plain values (not a verdict: PASS) */
	__u64 fault_action;       /*  8 verdict on a fault (not a verdict: DROP) */
	__u32 controller_ifindex; /* 16 */
	__u32 clock_pinned;       /* 20 NF_CLOCK_*: 1 nf_now()/nf_rand() pinned, 2 only nf_rand() */
	__u64 now_ns;             /* 24 nf_now() when pinned */
	__u64 rand_seed;          /* 32 seed of nf_rand() when pinned (0: NF_RAND_SEED0) */
};
_Static_assert(sizeof(struct nf_config) == 40, "nf_config layout");

#define NF_RAND_SEED0 0x9e3779b97f4a7c15ULL

/* nf_config.clock_pinned (abi.md 7). */
enum nf_clock_mode {
	NF_CLOCK_REAL = 0,      /* nf_now(): bpf_ktime_get_ns(); nf_rand(): bpf_get_prandom_u32() */
	NF_CLOCK_PINNED = 1,    /* nf_now(): now_ns; nf_rand(): xorshift64 from rand_seed */
	NF_CLOCK_RAND_ONLY = 2, /* nf_now(): bpf_ktime_get_ns(); nf_rand() as pinned */
};

struct nf_frame {
	__u64 args[4];    /*   0 arguments of the NF being called */
	__u64 result;     /*  32 its result (NFs' shared entries) */
	__u32 cont;       /*  40 nfkit_progs index of the continuation (shared entries) */
	__u32 calls;      /*  44 NF calls so far in this packet (shared entries) */
	__u32 chain_id;   /*  48 the chain being run (shared entries) */
	__u32 pad;        /*  52 */
	__u64 locals[NF_FRAME_LOCALS]; /*  56 the chain's stack slots live across an NF call */
};
_Static_assert(sizeof(struct nf_frame) == 504, "nf_frame layout");

struct nf_cls_entry {
	__u32 chain_id;
	__u32 flags; /* NF_CLS_VALID */
};
enum nf_cls_flag {
	NF_CLS_VALID = 1, /* the entry is in use */
};

struct nf_cls_ip4_key {
	__u32 prefixlen;
	__u8 addr[4];
};
struct nf_cls_ip6_key {
	__u32 prefixlen;
	__u8 addr[16];
};



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
	__uint(max_entries, NF_HOOKID_OTHER + 1);
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
	__uint(max_entries, NF_CLS_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_cls_ip4_key);
	__type(value, struct nf_cls_entry);
} nfkit_cls_ip4 NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NF_CLS_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_cls_ip6_key);
	__type(value, struct nf_cls_entry);
} nfkit_cls_ip6 NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NF_CLS_ENTRIES);
	__type(key, __u16);
	__type(value, struct nf_cls_entry);
} nfkit_cls_port NF__SHARED;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NF_CLS_DSCP_ENTRIES);
	__type(key, __u32);
	__type(value, struct nf_cls_entry);
} nfkit_cls_dscp NF__SHARED;
#endif

char _license[] __attribute__((weak)) SEC("license") = "Dual MIT/GPL";

/* ------------------------------------------------------------------ */
/* The ABI in BTF. Preprocessor constants leave no trace in an object;
 * the enums above do once a variable uses them. NF_ABI_ANCHOR (in one
 * object of the catalogue, nf/base.c) puts them, and the 64-bit
 * constants as values, into its BTF and .rodata, where nfkit-abi's test
 * checks its Rust twin against the header. */
struct nf_abi_anchor {
	enum nf_action action;
	enum nf_pi_flag pi_flag;
	enum nf_tcp_flag tcp_flag;
	enum nf_cls_flag cls_flag;
	enum nf_limit limit;
	enum nf_stat_col stat_col;
	enum nf_hook_id hook_id;
	enum nf_clock_mode clock_mode;
	__u64 verdict_bit;
	__u64 fault;
	__u64 value_max;
	__u64 rand_seed0;
};
#define NF_ABI_ANCHOR                                                         \
	static const volatile struct nf_abi_anchor nf_abi_anchor             \
		__attribute__((used)) = {                                     \
			.verdict_bit = NF_VERDICT_BIT,                        \
			.fault = NF_FAULT,                                    \
			.value_max = NF_VALUE_MAX,                            \
			.rand_seed0 = NF_RAND_SEED0,                          \
	}

#endif /* NFKIT_ABI_H */
