/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module firewall
 * @hooks xdp tc socket
 * Stateful connection tracking for TCP and UDP, and an ordered 5-tuple
 * rule table (ACL). IPv4 and IPv6.
 *
 * conntrack() result encoding: the state in bits 0..7 (CT_UNTRACKED 0,
 * CT_NEW 1, CT_ESTABLISHED 2, CT_INVALID 3) plus CT_REPLY (0x100) when the
 * packet goes in the reply direction, i.e. opposite to the packet that
 * opened the connection (without CT_REPLY it goes in the opening, the
 * "original", direction). As in netfilter, original-direction packets are
 * NEW until a valid reply has been seen, then ESTABLISHED.
 *
 * TCP follows the handshake: a SYN (without ACK/RST) with no live entry
 * opens a connection (NEW); the reply's SYN+ACK is ESTABLISHED|REPLY; the
 * opener's ACK then completes it. Packets that do not fit the handshake
 * (an ACK with no connection, a reply without SYN+ACK before the
 * handshake, a SYN on an established connection) are INVALID and change
 * nothing. FINs are recorded per side; after FINs from both sides a new
 * SYN may reopen the 5-tuple. An RST ends the connection (entry deleted)
 * and is itself NEW (original direction, before any reply) or
 * ESTABLISHED. UDP: the first packet opens (NEW), a packet in the other
 * direction makes it ESTABLISHED.
 *
 * Idle timeouts (nf_now() clock): TCP handshake 60 s, established and
 * half-closed 3600 s, closed by both sides 30 s; UDP unreplied 30 s,
 * replied 180 s. An expired entry counts as absent; a clock that steps back
 * ages nothing.
 * Concurrency: an entry is one u64 word (stage, opener side, FIN bits,
 * last-seen time) updated with compare-and-swap, up to 4 attempts; a packet
 * that loses 4 races in a row gets the result computed from the latest
 * state without storing it.
 *
 * acl() scans the rule table from index 0 and stops at the first rule
 * without ACL_VALID; the first rule that matches gives the result. A rule
 * matches when (addr & mask) == (rule addr & mask) for source and
 * destination (16-byte addresses: IPv6, or IPv4-mapped ::ffff:a.b.c.d with
 * the mask's first 96 bits set for an IPv4-only rule; an all-zero mask is a
 * wildcard for both versions), the protocol equals (0: any), and both ports
 * lie in their inclusive ranges (0..65535: any; packets without ports have
 * port 0).
 * @const CT_UNTRACKED conntrack(): not TCP/UDP, or no ports (non-first fragment)
 * @const CT_NEW conntrack(): opens or belongs to a connection that has not seen a reply yet
 * @const CT_ESTABLISHED conntrack(): belongs to a connection that has seen a reply
 * @const CT_INVALID conntrack(): does not fit the connection's state (nothing changed)
 * @const CT_REPLY conntrack() flag: the packet goes in the reply direction
 * @const ACL_VALID rule flag: the rule is in use (the first rule without it ends the table)
 * @const ACL_RULES number of rule slots
 * @const ACL_NO_MATCH acl() result when no rule matches
 * @map nf_firewall_ct LRU hash (65536): canonical 5-tuple {addr a[16], addr b[16], port a, port b, proto, 3 zero bytes} (side a = the smaller (addr, port)) -> u64 state word
 * @map nf_firewall_acl array (ACL_RULES): {src[16], src_mask[16], dst[16], dst_mask[16], sport_lo, sport_hi, dport_lo, dport_hi (u16, host order), proto u8, flags u8, pad[6], action u64} (88 bytes)
 */
#include "nfkit.h"

#define NF_CT_UNTRACKED 0
#define NF_CT_NEW 1
#define NF_CT_ESTABLISHED 2
#define NF_CT_INVALID 3
#define NF_CT_REPLY 0x100
#define NF_ACL_VALID 1
#define NF_ACL_RULES 64
#define NF_ACL_NO_MATCH 0

#define NF_CT_ENTRIES 65536

/* Stages kept in the entry (bits 0..7 of the state word). */
#define CT_S_SYN_SENT 1
#define CT_S_SYN_RECV 2
#define CT_S_EST 3
#define CT_S_FIN_WAIT 4
#define CT_S_CLOSING 5
#define CT_S_UDP_UNREPLIED 8
#define CT_S_UDP_REPLIED 9
/* bit 8: the opener is side b; bit 9: FIN from side a; bit 10: FIN from side b;
 * bits 16..63: last-seen time in units of 2^20 ns. */
#define CT_OPENER_B (1ULL << 8)
#define CT_FIN_A (1ULL << 9)
#define CT_FIN_B (1ULL << 10)
#define CT_TSHIFT 20
#define CT_SEC(s) (((s) * 1000000000ULL) >> CT_TSHIFT)

struct nf_ct_key {
	__u8 a_addr[16];
	__u8 b_addr[16];
	__u16 a_port;
	__u16 b_port;
	__u8 proto;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_CT_ENTRIES);
	__type(key, struct nf_ct_key);
	__type(value, __u64);
} nf_firewall_ct SEC(".maps");

struct nf_acl_rule {
	__u8 src[16];
	__u8 src_mask[16];
	__u8 dst[16];
	__u8 dst_mask[16];
	__u16 sport_lo;
	__u16 sport_hi;
	__u16 dport_lo;
	__u16 dport_hi;
	__u8 proto;
	__u8 flags;
	__u8 pad[6];
	__u64 action;
};
_Static_assert(sizeof(struct nf_acl_rule) == 88, "nf_acl_rule layout");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NF_ACL_RULES);
	__type(key, __u32);
	__type(value, struct nf_acl_rule);
} nf_firewall_acl SEC(".maps");

static __always_inline __u64 ct_word(__u64 stage, __u64 flags, __u64 t)
{
	return stage | flags | (t << 16);
}

static __always_inline __u64 ct_timeout(__u64 stage)
{
	switch (stage) {
	case CT_S_SYN_SENT:
	case CT_S_SYN_RECV:
		return CT_SEC(60);
	case CT_S_EST:
	case CT_S_FIN_WAIT:
		return CT_SEC(3600);
	case CT_S_UDP_REPLIED:
		return CT_SEC(180);
	default: /* CLOSING, UDP_UNREPLIED */
		return CT_SEC(30);
	}
}

/* One step of the state machine. `old` is the entry's word (0: none),
 * side_b: the packet's source is side b. Sets *nw to the new word:
 * equal to old for no change, 0 to delete the entry (or to create none). */
static __always_inline __u64 ct_step(__u64 old, __u8 proto, __u8 fl, __u64 side_b, __u64 t, __u64 *nw)
{
	__u64 stage = old & 0xff, opener = old & CT_OPENER_B, fins = old & (CT_FIN_A | CT_FIN_B);
	__u64 last = old >> 16, me = side_b ? CT_OPENER_B : 0, r;
	__u8 syn = fl & NF_TCP_SYN, ack = fl & NF_TCP_ACK;

	*nw = old;
	if (stage && t > last && t - last > ct_timeout(stage))
		stage = 0; /* expired: as if absent */
	if (!stage) {
		if (proto == IPPROTO_UDP) {
			*nw = ct_word(CT_S_UDP_UNREPLIED, me, t);
			return NF_CT_NEW;
		}
		if (syn && !(fl & (NF_TCP_ACK | NF_TCP_RST))) {
			*nw = ct_word(CT_S_SYN_SENT, me, t);
			return NF_CT_NEW;
		}
		return NF_CT_INVALID;
	}
	r = (me != opener) ? NF_CT_REPLY : 0;
	if (proto == IPPROTO_UDP) {
		if (r) {
			*nw = ct_word(CT_S_UDP_REPLIED, opener, t);
			return NF_CT_ESTABLISHED | r;
		}
		*nw = ct_word(stage, opener, t);
		return stage == CT_S_UDP_UNREPLIED ? NF_CT_NEW : NF_CT_ESTABLISHED;
	}
	if (fl & NF_TCP_RST) {
		*nw = 0;
		return (stage == CT_S_SYN_SENT && !r) ? NF_CT_NEW : NF_CT_ESTABLISHED | r;
	}
	if (stage == CT_S_SYN_SENT) {
		if (!r) {
			if (syn && !ack) {
				*nw = ct_word(stage, opener, t);
				return NF_CT_NEW;
			}
			return NF_CT_INVALID;
		}
		if (syn && ack) {
			*nw = ct_word(CT_S_SYN_RECV, opener, t);
			return NF_CT_ESTABLISHED | r;
		}
		return NF_CT_INVALID | r;
	}
	if (stage == CT_S_SYN_RECV) {
		if (!r) {
			if (syn && ack)
				return NF_CT_INVALID;
			if (!syn && !ack)
				return NF_CT_INVALID;
			*nw = ct_word(syn ? stage : CT_S_EST, opener, t);
			return NF_CT_ESTABLISHED;
		}
		if (syn && !ack)
			return NF_CT_INVALID | r;
		*nw = ct_word(stage, opener, t);
		return NF_CT_ESTABLISHED | r;
	}
	/* EST, FIN_WAIT, CLOSING */
	if (syn) {
		if (stage == CT_S_CLOSING && !ack) {
			*nw = ct_word(CT_S_SYN_SENT, me, t);
			return NF_CT_NEW;
		}
		return NF_CT_INVALID | r;
	}
	if (fl & NF_TCP_FIN)
		fins |= side_b ? CT_FIN_B : CT_FIN_A;
	stage = fins == (CT_FIN_A | CT_FIN_B) ? CT_S_CLOSING : fins ? CT_S_FIN_WAIT : CT_S_EST;
	*nw = ct_word(stage, opener | fins, t);
	return NF_CT_ESTABLISHED | r;
}

/**
 * @nf conntrack()
 * Track the packet's TCP or UDP connection (both directions share one entry).
 * @returns CT_NEW (1), CT_ESTABLISHED (2) or CT_INVALID (3), plus CT_REPLY
 *          (0x100) for reply-direction packets: 1 and 2 for the opener's
 *          packets, 0x102 for the replies, 3 / 0x103 for packets that do not
 *          fit; CT_UNTRACKED (0) for other protocols, non-IP packets and
 *          packets without ports (non-first fragments, truncated headers).
 * @maps nf_firewall_ct
 * @bad no arguments. A full table evicts the least recently used connection.
 */
NF(conntrack)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_ct_key k = {};
	__u64 *v, old, nw, r = NF_CT_UNTRACKED, t, side_b;

	if (!pi)
		return NF_FAULT;
	if ((pi->l4_proto != IPPROTO_TCP && pi->l4_proto != IPPROTO_UDP) || !(pi->flags & NF_PI_L4))
		return NF_CT_UNTRACKED;
	{
		__u64 *s = (__u64 *)pi->src, *d = (__u64 *)pi->dst;
		side_b = s[0] != d[0] ? s[0] > d[0] : s[1] != d[1] ? s[1] > d[1] : pi->sport > pi->dport;
	}
	if (side_b) {
		__builtin_memcpy(k.a_addr, pi->dst, 16);
		__builtin_memcpy(k.b_addr, pi->src, 16);
		k.a_port = pi->dport;
		k.b_port = pi->sport;
	} else {
		__builtin_memcpy(k.a_addr, pi->src, 16);
		__builtin_memcpy(k.b_addr, pi->dst, 16);
		k.a_port = pi->sport;
		k.b_port = pi->dport;
	}
	k.proto = pi->l4_proto;
	t = (nf_now() >> CT_TSHIFT) & 0xffffffffffffULL;

	v = bpf_map_lookup_elem(&nf_firewall_ct, &k);
	if (!v) {
		r = ct_step(0, k.proto, pi->tcp_flags, side_b, t, &nw);
		if (!nw || bpf_map_update_elem(&nf_firewall_ct, &k, &nw, BPF_NOEXIST) == 0)
			return r;
		v = bpf_map_lookup_elem(&nf_firewall_ct, &k); /* another CPU created it */
		if (!v)
			return r;
	}
	for (int i = 0; i < 4; i++) {
		old = *(volatile __u64 *)v;
		r = ct_step(old, k.proto, pi->tcp_flags, side_b, t, &nw);
		if (nw == old)
			return r;
		if (!nw) {
			bpf_map_delete_elem(&nf_firewall_ct, &k);
			return r;
		}
		if (__sync_val_compare_and_swap(v, old, nw) == old)
			return r;
	}
	return r;
}
NF_EXPORT(conntrack);

/**
 * @nf acl()
 * First matching rule of the ordered 5-tuple rule table.
 * @returns the matching rule's action, as stored: a value or a verdict
 *          (e.g. DROP), so a rule can end the chain or feed it a number;
 *          ACL_NO_MATCH (0) when no rule matches.
 * @maps nf_firewall_acl
 * @bad no arguments. Rules after the first one without ACL_VALID are
 *      ignored. A rule whose action has bit 63 set but is not a verdict is a
 *      fault when it matches. A range with lo > hi matches nothing.
 */
NF(acl)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	__u64 *ps, *pd;

	if (!pi)
		return NF_FAULT;
	ps = (__u64 *)pi->src;
	pd = (__u64 *)pi->dst;
	for (__u32 i = 0; i < NF_ACL_RULES; i++) {
		__u32 key = i;
		struct nf_acl_rule *r = bpf_map_lookup_elem(&nf_firewall_acl, &key);
		if (!r || !(r->flags & NF_ACL_VALID))
			break;
		__u64 *rs = (__u64 *)r->src, *rsm = (__u64 *)r->src_mask;
		__u64 *rd = (__u64 *)r->dst, *rdm = (__u64 *)r->dst_mask;
		if (((ps[0] ^ rs[0]) & rsm[0]) | ((ps[1] ^ rs[1]) & rsm[1]) |
		    ((pd[0] ^ rd[0]) & rdm[0]) | ((pd[1] ^ rd[1]) & rdm[1]))
			continue;
		if (r->proto && r->proto != pi->l4_proto)
			continue;
		if (pi->sport < r->sport_lo || pi->sport > r->sport_hi ||
		    pi->dport < r->dport_lo || pi->dport > r->dport_hi)
			continue;
		return r->action;
	}
	return NF_ACL_NO_MATCH;
}
NF_EXPORT(acl);
