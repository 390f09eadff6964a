/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module dpi
 * @hooks xdp tc socket
 * Deep packet inspection: the payload of a TCP or UDP packet scanned by a
 * DFA compiled from a set of regular expressions (crate nfkit-dpi). The
 * DFAs of up to DPI_SETS pattern sets share the tables below, which the
 * control plane fills (nfkit_dpi::Tables); the NF only walks them, so a
 * new pattern set needs no new program. Each step reads one payload byte
 * and one u16 of the transition table; matches are reported one step late
 * (as the DFA knows them), so a match ending at the last byte scanned is
 * seen on the next byte or at the end of the payload.
 * @const DPI_STATES DFA states the tables hold over all sets (state 0 matches nothing)
 * @const DPI_SETS pattern sets (set ids 0..DPI_SETS-1)
 * @const DPI_LIMIT bytes scanned when the limit argument is 0
 * @const DPI_MAX_LIMIT most bytes one call scans
 * @map nf_dpi_next array (1, read-only to programs): u16 next[DPI_STATES * 257], next state by (state, byte or 256 = end of payload)
 * @map nf_dpi_accept array (1, read-only to programs): u16 accept[DPI_STATES], 0 or 1 + the pattern whose match ended one step before the state
 * @map nf_dpi_sets array (DPI_SETS, read-only to programs): {u32 start; u32 dead} state where a set's scan starts, and its dead state (never leaves, never matches)
 */
#include "nfkit.h"

#define NF_DPI_STATES 2048
#define NF_DPI_COLS 257
#define NF_DPI_EOI 256
#define NF_DPI_SETS 64
#define NF_DPI_LIMIT 2048
#define NF_DPI_MAX_LIMIT 65535
#define NF_DPI_CHUNK 64

struct nf_dpi_next {
	__u16 next[NF_DPI_STATES * NF_DPI_COLS];
};

struct nf_dpi_accept {
	__u16 accept[NF_DPI_STATES];
};

struct nf_dpi_set {
	__u32 start;
	__u32 dead;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__type(key, __u32);
	__type(value, struct nf_dpi_next);
} nf_dpi_next SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__type(key, __u32);
	__type(value, struct nf_dpi_accept);
} nf_dpi_accept SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NF_DPI_SETS);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__type(key, __u32);
	__type(value, struct nf_dpi_set);
} nf_dpi_sets SEC(".maps");

/* Copies `len` (1..NF_DPI_CHUNK) packet bytes at `off` into `buf`. */
static __always_inline long nf__dpi_load(NF_CTX *ctx, __u32 off, __u8 *buf, __u32 len)
{
#if NF_HOOK_ID == NF_HOOKID_XDP
	return bpf_xdp_load_bytes(ctx, off, buf, len);
#elif NF_HOOK_ID == NF_HOOKID_TC
	return bpf_skb_load_bytes(ctx, off, buf, len);
#else
	return bpf_skb_load_bytes_relative(ctx, off, buf, len, BPF_HDR_START_NET);
#endif
}

/* A scan in progress (the bpf_loop callback's context). */
struct nf__dpi_scan {
	NF_CTX *ctx;
	__u32 off;    /* payload start in the packet */
	__u32 n;      /* bytes to scan */
	__u32 state;
	__u32 dead;
	__u64 result; /* 0 while nothing matched */
	/* The payload bytes from (i & ~63); twice the chunk so that the
	 * load's length, masked for the verifier, always fits. */
	__u8 buf[2 * NF_DPI_CHUNK];
};

/* One step of the DFA from `state` on column `col`; the state after it,
 * or NF_DPI_STATES when the tables are bad. */
static __always_inline __u32 nf__dpi_step(struct nf_dpi_next *t, __u32 state, __u32 col)
{
	__u32 i = state * NF_DPI_COLS + col;
	if (i >= NF_DPI_STATES * NF_DPI_COLS)
		return NF_DPI_STATES;
	return t->next[i];
}

/* Byte i of the payload: loads the chunk it starts when i is a multiple
 * of NF_DPI_CHUNK, then steps the DFA. Returns 1 (stop) on a match, the
 * dead state or a failed load. */
static long nf__dpi_byte(__u32 i, void *arg)
{
	struct nf__dpi_scan *s = arg;
	struct nf_dpi_next *t;
	struct nf_dpi_accept *acc;
	__u32 k = 0, j = i & (NF_DPI_CHUNK - 1), want, st;

	if (i >= s->n)
		return 1;
	if (j == 0) {
		want = s->n - i;
		if (want > NF_DPI_CHUNK)
			want = NF_DPI_CHUNK;
		/* A no-op on the value that the verifier sees as a bound
		 * (hidden from clang, which would drop it). */
		nf__opaque(want);
		want &= 2 * NF_DPI_CHUNK - 1;
		if (want == 0 || nf__dpi_load(s->ctx, s->off + i, s->buf, want) != 0) {
			s->state = NF_DPI_STATES;
			return 1;
		}
	}
	t = bpf_map_lookup_elem(&nf_dpi_next, &k);
	acc = bpf_map_lookup_elem(&nf_dpi_accept, &k);
	if (!t || !acc)
		return 1;
	st = nf__dpi_step(t, s->state, s->buf[j]);
	s->state = st;
	if (st >= NF_DPI_STATES)
		return 1;
	if (acc->accept[st]) {
		s->result = ((__u64)acc->accept[st] << 32) | i;
		return 1;
	}
	return st == s->dead;
}

/* Offset and length of the packet's TCP or UDP payload; 0 when it has
 * none. */
static __always_inline __u32 nf__dpi_payload(NF_CTX *ctx, struct nf_pkt_info *pi, __u32 *len)
{
	__u8 doff;
	__u32 off, total;

	if (!(pi->flags & NF_PI_L4) || (pi->flags & NF_PI_FRAG))
		return 0;
	if (pi->l4_proto == IPPROTO_UDP) {
		off = pi->l4_off + 8;
	} else if (pi->l4_proto == IPPROTO_TCP) {
		/* The data offset: the high nibble of TCP header byte 12. */
		if (nf__dpi_load(ctx, pi->l4_off + 12, &doff, 1) != 0)
			return 0;
		off = pi->l4_off + (doff >> 4) * 4;
	} else {
		return 0;
	}
#if NF_HOOK_ID == NF_HOOKID_XDP
	/* The whole frame, fragments of a multi-buffer (jumbo) frame too;
	 * pkt_len counts the linear part only. */
	total = bpf_xdp_get_buff_len(ctx);
#elif NF_HOOK_ID == NF_HOOKID_TC
	total = pi->pkt_len;
#else
	/* A socket filter's skb->len starts where the socket's protocol
	 * left skb->data (the UDP header on a live UDP socket, the IP header
	 * in a test run): the IP header's length is what reaches the end. */
	{
		__u8 lb[2];
		__u32 at = pi->ip_version == 6 ? 4 : 2;
		if (nf__dpi_load(ctx, pi->l3_off + at, lb, 2) != 0)
			return 0;
		total = pi->l3_off + ((__u32)lb[0] << 8 | lb[1]);
		if (pi->ip_version == 6)
			total += 40;
	}
#endif
	if (off >= total)
		return 0;
	*len = total - off;
	return off;
}

/**
 * @nf match(set, limit)
 * Scan the packet's TCP or UDP payload for the patterns of a set: the
 * first match, i.e. the one that ends first (the lowest pattern index
 * among those ending there). `^` is the payload's start, `$` its end.
 * @arg set pattern set id, 0..DPI_SETS-1 (a chain's Patterns(...) get ids
 *      in order; nfkit_dpi::Tables fills them)
 * @arg limit payload bytes to scan, 1..DPI_MAX_LIMIT; 0 means DPI_LIMIT
 * @returns 0 when no pattern matched (or the packet has no TCP/UDP
 *          payload); else (pattern index + 1) << 32 | offset in the payload
 *          just after the match.
 * @maps nf_dpi_next nf_dpi_accept nf_dpi_sets
 * @bad a set id >= DPI_SETS or a set never filled matches nothing; limit
 *      above DPI_MAX_LIMIT scans DPI_MAX_LIMIT bytes; tables that name a
 *      state past DPI_STATES stop the scan with no match.
 */
NF(match, set, limit)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_dpi_next *t;
	struct nf_dpi_accept *acc;
	struct nf_dpi_set *cfg;
	struct nf__dpi_scan s = {};
	__u32 k = 0, key, len = 0, col, st;
	__u8 b;

	if (!pi)
		return NF_FAULT;
	if (set >= NF_DPI_SETS)
		return 0;
	key = (__u32)set;
	cfg = bpf_map_lookup_elem(&nf_dpi_sets, &key);
	if (!cfg || cfg->start == 0)
		return 0;
	s.ctx = ctx;
	s.off = nf__dpi_payload(ctx, pi, &len);
	if (s.off == 0)
		return 0;
	if (limit == 0)
		limit = NF_DPI_LIMIT;
	if (limit > NF_DPI_MAX_LIMIT)
		limit = NF_DPI_MAX_LIMIT;
	s.n = len < limit ? len : (__u32)limit;
	s.state = cfg->start;
	s.dead = cfg->dead;
	bpf_loop(s.n, nf__dpi_byte, &s, 0);
	if (s.result || s.state >= NF_DPI_STATES || s.state == s.dead)
		return s.result;
	/* One more step shows a match ending at s.n: the next byte when the
	 * scan was cut short, else the end of the payload. */
	col = NF_DPI_EOI;
	if (s.n < len) {
		if (nf__dpi_load(ctx, s.off + s.n, &b, 1) != 0)
			return 0;
		col = b;
	}
	t = bpf_map_lookup_elem(&nf_dpi_next, &k);
	acc = bpf_map_lookup_elem(&nf_dpi_accept, &k);
	if (!t || !acc)
		return 0;
	st = nf__dpi_step(t, s.state, col);
	if (st >= NF_DPI_STATES || !acc->accept[st])
		return 0;
	return ((__u64)acc->accept[st] << 32) | s.n;
}
NF_EXPORT(match);
