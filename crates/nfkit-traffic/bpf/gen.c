// SPDX-License-Identifier: MIT OR Apache-2.0
// nfkit's live-frame generator: run by BPF_PROG_TEST_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES, once per frame. Each run writes a whole
// frame from a template (the weighted round-robin schedule of flows or
// the frames of a pcap, in order), stamps its sequence number with the
// UDP checksum updated, and redirects it to the target device.
//
// The kernel recycles the frame pages and resets them only sometimes,
// so every run sets the length and writes every byte of the frame.
//
// A test run adds its program to the kernel's XDP dispatcher and removes
// it at the end, each time waiting for an RCU grace period (some 25 ms);
// a program attached to a device stays in the dispatcher, so the sender
// attaches this one to the namespace's loopback while it sends, where
// it passes every frame (they do not come from the target device).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define TMPL_MAX 2048

struct tmpl {
	__u32 len;       // frame length
	__u32 stamp_off; // offset of the sequence number (0: not stamped)
	__u32 csum_off;  // offset of the UDP checksum
	__u16 csum;      // UDP checksum of the frame with sequence 0 (host order)
	__u16 csum_keep; // 1: leave the checksum as it is (IPv4 "none")
	__u8 data[TMPL_MAX];
};

struct gen_state {
	__u32 ifindex;   // redirect target (0: drop, a probe)
	__u32 sched_len; // entries of `schedule` in use
	__u32 pos;       // next schedule entry
	__u32 pad;
	__u64 frames;    // frames generated
	__u64 seq;       // next sequence number
	__u64 bytes;     // bytes generated
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tmpl);
} templates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} schedule SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_state);
} state SEC(".maps");

static __always_inline __u32 fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

SEC("xdp")
int nfkit_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct gen_state *st = bpf_map_lookup_elem(&state, &zero);
	if (!st)
		return XDP_ABORTED;
	if (!st->ifindex)
		return XDP_DROP;
	// Attached to a device (loopback) only to stay in the kernel's XDP
	// dispatcher: frames really received there pass untouched.
	if (ctx->ingress_ifindex != st->ifindex)
		return XDP_PASS;
	__u32 pos = st->pos;
	__u32 next = pos + 1;
	if (next >= st->sched_len)
		next = 0;
	st->pos = next;
	__u32 *ti = bpf_map_lookup_elem(&schedule, &pos);
	if (!ti)
		return XDP_ABORTED;
	struct tmpl *t = bpf_map_lookup_elem(&templates, ti);
	if (!t)
		return XDP_ABORTED;
	__u32 len = t->len;
	if (len < 14 || len > TMPL_MAX)
		return XDP_ABORTED;
	int have = (int)(ctx->data_end - ctx->data);
	if (have != (int)len && bpf_xdp_adjust_tail(ctx, (int)len - have))
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, t->data, len))
		return XDP_ABORTED;
	__u32 off = t->stamp_off;
	if (off) {
		__u64 n = st->seq++;
		__u8 be[8];
		__u32 sum = 0;
#pragma unroll
		for (int i = 0; i < 8; i++)
			be[i] = (__u8)(n >> (56 - 8 * i));
#pragma unroll
		for (int i = 0; i < 8; i += 2)
			sum += ((__u32)be[i] << 8) | be[i + 1];
		if (bpf_xdp_store_bytes(ctx, off, be, 8))
			return XDP_ABORTED;
		if (!t->csum_keep) {
			__u16 c = (__u16)~fold((__u16)~t->csum + sum);
			if (c == 0)
				c = 0xffff;
			__u8 cb[2] = { (__u8)(c >> 8), (__u8)c };
			if (bpf_xdp_store_bytes(ctx, t->csum_off, cb, 2))
				return XDP_ABORTED;
		}
	}
	st->frames++;
	st->bytes += len;
	return bpf_redirect(st->ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
