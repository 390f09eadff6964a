/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module mark
 * @hooks xdp tc
 * Rewrite the DSCP, ECN and TTL / hop limit fields of IPv4 and IPv6
 * headers. IPv4: the header checksum is updated incrementally (RFC 1624,
 * HC' = ~(~HC + ~m + m')), so it stays valid (an already wrong checksum
 * stays wrong by the same amount). IPv6 has no header checksum; on TC the
 * skb's CHECKSUM_COMPLETE sum is adjusted with bpf_csum_update. Neither
 * field is in the L4 pseudo-header, so L4 checksums stay valid. The info
 * block's tos / ttl are updated too (no re-parse needed).
 * @const MARK_NOT_IP the result when the packet has no (complete) IPv4 / IPv6 header: nothing changed
 * @const MARK_BAD_ARG the result for an out-of-range value: nothing changed
 */
#include "nfkit.h"

#define NF_MARK_NOT_IP 256
#define NF_MARK_BAD_ARG 257

/* One's complement add with end-around carry, 16 bits. */
static __always_inline __u16 nf__csum16_replace(__u16 hc, __u16 old, __u16 new)
{
	__u32 s = (__u32)(__u16)~hc + (__u16)~old + new;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* Pointer to `len` writable bytes of the IP header, or NULL. */
#define NF__IPHDR(ctx, pi, len) ({                                            \
	void *d_ = (void *)(long)(ctx)->data, *e_ = (void *)(long)(ctx)->data_end; \
	__u32 o_ = (pi)->l3_off;                                              \
	void *p_ = 0;                                                         \
	if (o_ <= 64 && d_ + o_ + (len) <= e_)                                \
		p_ = d_ + o_;                                                 \
	p_; })

static __always_inline __u64 nf__set_tos(NF_CTX *ctx, struct nf_pkt_info *pi, __u8 keep_mask, __u8 bits)
{
	__u8 old = pi->tos, tos = (old & keep_mask) | bits;

	if (pi->ip_version == 4) {
		struct iphdr *ip = NF__IPHDR(ctx, pi, sizeof(struct iphdr));
		if (!ip)
			return NF_MARK_NOT_IP;
		__u16 *w = (__u16 *)ip, ow = w[0];
		ip->tos = tos;
		ip->check = nf__csum16_replace(ip->check, ow, w[0]);
	} else if (pi->ip_version == 6) {
		__u8 *h = NF__IPHDR(ctx, pi, sizeof(struct ipv6hdr));
		if (!h)
			return NF_MARK_NOT_IP;
#if NF_HOOK_ID == NF_HOOKID_TC
		__u32 ow = *(__u32 *)h;
		h[0] = (h[0] & 0xf0) | (tos >> 4);
		h[1] = (h[1] & 0x0f) | (tos << 4);
		__u64 s = (__u64)(__u32)~ow + *(__u32 *)h;
		bpf_csum_update(ctx, (__u32)((s & 0xffffffff) + (s >> 32)));
#else
		h[0] = (h[0] & 0xf0) | (tos >> 4);
		h[1] = (h[1] & 0x0f) | (tos << 4);
#endif
	} else {
		return NF_MARK_NOT_IP;
	}
	pi->tos = tos;
	return old;
}

/**
 * @nf set_dscp(v)
 * Set the DSCP (upper 6 bits of the IPv4 TOS / IPv6 traffic class), keeping ECN.
 * @arg v the new DSCP, 0..63
 * @returns the previous DSCP (0..63); MARK_NOT_IP (256) if the packet is not IPv4/IPv6.
 * @maps none
 * @bad v > 63: MARK_BAD_ARG (257), the packet is unchanged.
 */
NF(set_dscp, v)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	__u64 r;

	if (!pi)
		return NF_FAULT;
	if (v > 63)
		return NF_MARK_BAD_ARG;
	r = nf__set_tos(ctx, pi, 0x03, (__u8)(v << 2));
	return r == NF_MARK_NOT_IP ? r : r >> 2;
}
NF_EXPORT(set_dscp);

/**
 * @nf set_ecn(v)
 * Set the ECN field (lower 2 bits of the IPv4 TOS / IPv6 traffic class), keeping DSCP.
 * @arg v the new ECN codepoint, 0..3 (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)
 * @returns the previous ECN (0..3); MARK_NOT_IP (256) if the packet is not IPv4/IPv6.
 * @maps none
 * @bad v > 3: MARK_BAD_ARG (257), the packet is unchanged.
 */
NF(set_ecn, v)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	__u64 r;

	if (!pi)
		return NF_FAULT;
	if (v > 3)
		return NF_MARK_BAD_ARG;
	r = nf__set_tos(ctx, pi, 0xfc, (__u8)v);
	return r == NF_MARK_NOT_IP ? r : r & 3;
}
NF_EXPORT(set_ecn);

/**
 * @nf set_ttl(v)
 * Set the IPv4 TTL / IPv6 hop limit.
 * @arg v the new TTL / hop limit, 0..255
 * @returns the previous TTL / hop limit (0..255); MARK_NOT_IP (256) if the packet is not IPv4/IPv6.
 * @maps none
 * @bad v > 255: MARK_BAD_ARG (257), the packet is unchanged.
 */
NF(set_ttl, v)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	__u8 old;

	if (!pi)
		return NF_FAULT;
	if (v > 255)
		return NF_MARK_BAD_ARG;
	old = pi->ttl;
	if (pi->ip_version == 4) {
		struct iphdr *ip = NF__IPHDR(ctx, pi, sizeof(struct iphdr));
		if (!ip)
			return NF_MARK_NOT_IP;
		__u16 *w = (__u16 *)ip, ow = w[4];
		ip->ttl = (__u8)v;
		ip->check = nf__csum16_replace(ip->check, ow, w[4]);
	} else if (pi->ip_version == 6) {
		struct ipv6hdr *ip6 = NF__IPHDR(ctx, pi, sizeof(struct ipv6hdr));
		if (!ip6)
			return NF_MARK_NOT_IP;
#if NF_HOOK_ID == NF_HOOKID_TC
		__u32 *w = (__u32 *)ip6, ow = w[1];
		ip6->hop_limit = (__u8)v;
		__u64 s = (__u64)(__u32)~ow + w[1];
		bpf_csum_update(ctx, (__u32)((s & 0xffffffff) + (s >> 32)));
#else
		ip6->hop_limit = (__u8)v;
#endif
	} else {
		return NF_MARK_NOT_IP;
	}
	pi->ttl = (__u8)v;
	return old;
}
NF_EXPORT(set_ttl);
