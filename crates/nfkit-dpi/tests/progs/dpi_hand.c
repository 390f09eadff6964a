/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The bench's baseline: `(?i)union\s+select` scanned by a state machine
 * written by hand (what eBPFlow adapts from re2c output), over the UDP
 * payload with bpf_loop and the same 64-byte chunk loads as nf/dpi.c.
 * Leaves the nf.dpi.match result form in probe_out[0]. XDP only. */
#include "nfkit.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} probe_out SEC(".maps");

#define HAND_CHUNK 64

struct hand_scan {
	struct xdp_md *ctx;
	__u32 off, n, state;
	__u64 result;
	__u8 buf[2 * HAND_CHUNK];
};

static __always_inline int hand_space(__u8 c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* States: 0..5 "union" read so far, 6 after at least one blank, 7..11
 * "s".."selec" read; reading the "t" in state 11 is the match. */
static long hand_byte(__u32 i, void *arg)
{
	struct hand_scan *s = arg;
	__u32 j = i & (HAND_CHUNK - 1), want, st;
	__u8 c;

	if (i >= s->n)
		return 1;
	if (j == 0) {
		want = s->n - i;
		if (want > HAND_CHUNK)
			want = HAND_CHUNK;
		nf__opaque(want);
		want &= 2 * HAND_CHUNK - 1;
		if (want == 0 || bpf_xdp_load_bytes(s->ctx, s->off + i, s->buf, want) != 0)
			return 1;
	}
	c = s->buf[j] | 0x20; /* ASCII lower case (blanks stay apart) */
	st = s->state;
	if (st < 5 && c == "union"[st]) {
		st++;
	} else if ((st == 5 || st == 6) && hand_space(s->buf[j])) {
		st = 6;
	} else if (st == 6 && c == 's') {
		st = 7;
	} else if (st >= 7 && st < 12 && c == "select"[st - 6]) {
		st++;
		if (st == 12) {
			s->result = (1ULL << 32) | (i + 1);
			return 1;
		}
	} else {
		st = c == 'u';
	}
	s->state = st;
	return 0;
}

SEC("xdp") int hand(struct xdp_md *ctx)
{
	__u32 k0 = 0, len;
	__u64 *out = bpf_map_lookup_elem(&probe_out, &k0);
	struct nf_pkt_info *pi;
	struct hand_scan s = {};

	if (!out || !nf_enter(ctx))
		return 0;
	pi = nf_info(ctx);
	if (pi && (pi->flags & NF_PI_L4) && pi->l4_proto == IPPROTO_UDP) {
		s.ctx = ctx;
		s.off = pi->l4_off + 8;
		len = bpf_xdp_get_buff_len(ctx);
		if (s.off < len) {
			s.n = len - s.off;
			if (s.n > 2048)
				s.n = 2048;
			bpf_loop(s.n, hand_byte, &s, 0);
		}
	}
	nf_leave();
	*out = s.result;
	return 0;
}
