/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module classify
 * @hooks xdp tc socket
 * Classifiers: the entry programs of a hook. Each parses the packet once
 * into the info block, picks a chain from a map that the control plane
 * fills, runs it, and turns its result into the hook's return code
 * (nf_finish: statistics in nfkit_stats, fault counter, default and fault
 * actions from nfkit_config). A packet that no chain claims gets the
 * default action (counted in row 0 of nfkit_stats).
 *
 * Two forms of every classifier: the static one (program <name>) calls
 * nfkit_dispatch(ctx, chain_id, 0, 0, 0), which the chain compiler defines
 * when it links chains, NFs and this object into one program (the weak
 * fallback here returns a plain value, so the object loads alone and
 * applies the default action); the dynamic one (program dyn_<name>)
 * tail-calls the chain's entry at nfkit_progs[chain_id] (the chain's
 * segments use the call frame nfkit_frame only for what they pass
 * through it, abi.md 5); a missing entry is a fault.
 *
 * The module is built once more for the software switch
 * (-DNF_HOOK_SWITCH): an XDP context, and its programs return the
 * resolved verdict (abi.md 1) instead of an XDP code. The switch links the
 * XDP builds of the other modules.
 *
 * Map entries are struct nf_cls_entry {u32 chain_id; u32 flags}: an entry
 * without CLS_VALID, or with chain_id > 62, is ignored.
 * @const CLS_VALID nf_cls_entry flag: the entry is in use
 * @map nfkit_cls_ip4 LPM trie (4096): {prefixlen u32, addr[4]} -> nf_cls_entry (by_ipv4_dst, by_ipv4_src)
 * @map nfkit_cls_ip6 LPM trie (4096): {prefixlen u32, addr[16]} -> nf_cls_entry (by_ipv6_dst, by_ipv6_src)
 * @map nfkit_cls_port hash (4096): u16 port (host order) -> nf_cls_entry (by_l4_dport)
 * @map nfkit_cls_dscp array (64): u32 dscp -> nf_cls_entry (by_dscp)
 */
#define NF_CLASSIFIER_MAPS
#include "nfkit.h"

#define NF_NO_CHAIN ((__u32)-1)

#if NF_HOOK_ID == NF_HOOKID_XDP /* XDP and the software switch */
#define NF_CLS_SEC "xdp"
#elif NF_HOOK_ID == NF_HOOKID_TC
#define NF_CLS_SEC "tc"
#else
#define NF_CLS_SEC "socket"
#endif

/* The chain compiler's dispatcher replaces this weak fallback at link time. */
NF_FUNC __u64 nfkit_dispatch(NF_CTX *ctx, __u64 chain_id, __u64 _a2, __u64 _a3, __u64 _a4)
{
	return 0;
}

/* Dynamic mode: the chain compiler's segments end here (a global function
 * they call): count the chain's result for the frame's chain and turn it
 * into the hook's return code. */
NF_FUNC __u64 nfkit_dyn_finish(NF_CTX *ctx, __u64 r, __u64 _a2, __u64 _a3, __u64 _a4)
{
	__u32 slot = nf__slot();
	struct nf_frame *f = bpf_map_lookup_elem(&nfkit_frame, &slot);
	return nf_finish(ctx, f ? f->chain_id : NF_NO_CHAIN, r);
}

/* Dynamic mode with per-call-site segments: the same end, the chain id a
 * constant of the segment (the slot the classifier tail-called), so the
 * frame is not looked up again. */
NF_FUNC __u64 nfkit_dyn_end(NF_CTX *ctx, __u64 r, __u64 chain_id, __u64 _a3, __u64 _a4)
{
	return nf_finish(ctx, (__u32)chain_id, r);
}

static __always_inline __u32 nf__cls(struct nf_cls_entry *e)
{
	return (e && (e->flags & NF_CLS_VALID) && e->chain_id < NF_MAX_CHAINS) ? e->chain_id : NF_NO_CHAIN;
}

static __always_inline __u32 cls_every_packet(struct nf_pkt_info *pi)
{
	return 0;
}

static __always_inline __u32 nf__cls_ip4(struct nf_pkt_info *pi, __u8 *addr)
{
	struct nf_cls_ip4_key k = { .prefixlen = 32 };
	if (pi->ip_version != 4)
		return NF_NO_CHAIN;
	__builtin_memcpy(k.addr, addr + 12, 4);
	return nf__cls(bpf_map_lookup_elem(&nfkit_cls_ip4, &k));
}

static __always_inline __u32 nf__cls_ip6(struct nf_pkt_info *pi, __u8 *addr)
{
	struct nf_cls_ip6_key k = { .prefixlen = 128 };
	if (pi->ip_version != 6)
		return NF_NO_CHAIN;
	__builtin_memcpy(k.addr, addr, 16);
	return nf__cls(bpf_map_lookup_elem(&nfkit_cls_ip6, &k));
}

static __always_inline __u32 cls_by_ipv4_dst(struct nf_pkt_info *pi) { return nf__cls_ip4(pi, pi->dst); }
static __always_inline __u32 cls_by_ipv4_src(struct nf_pkt_info *pi) { return nf__cls_ip4(pi, pi->src); }
static __always_inline __u32 cls_by_ipv6_dst(struct nf_pkt_info *pi) { return nf__cls_ip6(pi, pi->dst); }
static __always_inline __u32 cls_by_ipv6_src(struct nf_pkt_info *pi) { return nf__cls_ip6(pi, pi->src); }

static __always_inline __u32 cls_by_l4_dport(struct nf_pkt_info *pi)
{
	__u16 port = pi->dport;
	if (!(pi->flags & NF_PI_L4) || (pi->l4_proto != IPPROTO_TCP && pi->l4_proto != IPPROTO_UDP &&
					pi->l4_proto != IPPROTO_SCTP))
		return NF_NO_CHAIN;
	return nf__cls(bpf_map_lookup_elem(&nfkit_cls_port, &port));
}

static __always_inline __u32 cls_by_dscp(struct nf_pkt_info *pi)
{
	__u32 d = pi->tos >> 2;
	if (!pi->ip_version)
		return NF_NO_CHAIN;
	return nf__cls(bpf_map_lookup_elem(&nfkit_cls_dscp, &d));
}

#define NF_CLASSIFIER(name)                                                   \
	SEC(NF_CLS_SEC) NF_RET name(NF_CTX *ctx)                              \
	{                                                                     \
		struct nf_pkt_info *pi = nf_enter(ctx);                       \
		__u32 c;                                                      \
		if (!pi)                                                      \
			return nf_action(ctx, NF_FAULT);                      \
		c = cls_##name(pi);                                           \
		if (c == NF_NO_CHAIN)                                         \
			return nf_finish(ctx, NF_NO_CHAIN, 0);                \
		return nf_finish(ctx, c, nfkit_dispatch(ctx, c, 0, 0, 0));    \
	}                                                                     \
	SEC(NF_CLS_SEC) NF_RET dyn_##name(NF_CTX *ctx)                        \
	{                                                                     \
		struct nf_pkt_info *pi = nf_enter(ctx);                       \
		__u32 c;                                                      \
		if (!pi)                                                      \
			return nf_action(ctx, NF_FAULT);                      \
		c = cls_##name(pi);                                           \
		if (c == NF_NO_CHAIN)                                         \
			return nf_finish(ctx, NF_NO_CHAIN, 0);                \
		bpf_tail_call(ctx, &nfkit_progs, c);                          \
		return nf_finish(ctx, c, NF_FAULT);                           \
	}

/**
 * @classifier every_packet
 * Runs chain 0 for every packet.
 * @key none
 * @maps none
 */
NF_CLASSIFIER(every_packet)

/**
 * @classifier by_ipv4_dst
 * Longest prefix of the IPv4 destination address; IPv6 and non-IP packets are unclaimed.
 * @key IPv4 destination prefix
 * @maps nfkit_cls_ip4
 */
NF_CLASSIFIER(by_ipv4_dst)

/**
 * @classifier by_ipv4_src
 * Longest prefix of the IPv4 source address; IPv6 and non-IP packets are unclaimed.
 * @key IPv4 source prefix
 * @maps nfkit_cls_ip4
 */
NF_CLASSIFIER(by_ipv4_src)

/**
 * @classifier by_ipv6_dst
 * Longest prefix of the IPv6 destination address; IPv4 and non-IP packets are unclaimed.
 * @key IPv6 destination prefix
 * @maps nfkit_cls_ip6
 */
NF_CLASSIFIER(by_ipv6_dst)

/**
 * @classifier by_ipv6_src
 * Longest prefix of the IPv6 source address; IPv4 and non-IP packets are unclaimed.
 * @key IPv6 source prefix
 * @maps nfkit_cls_ip6
 */
NF_CLASSIFIER(by_ipv6_src)

/**
 * @classifier by_l4_dport
 * TCP, UDP or SCTP destination port (IPv4 and IPv6); packets without ports are unclaimed.
 * @key destination port (u16, host order)
 * @maps nfkit_cls_port
 */
NF_CLASSIFIER(by_l4_dport)

/**
 * @classifier by_dscp
 * DSCP of the IPv4 TOS / IPv6 traffic class; non-IP packets are unclaimed.
 * @key DSCP 0..63
 * @maps nfkit_cls_dscp
 */
NF_CLASSIFIER(by_dscp)
