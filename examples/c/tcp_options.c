/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * examples/tcp_options.py written by hand as one ordinary XDP program
 * (the baseline of `make bench`).
 *
 * Same logic: walks the options of TCP SYN segments (IPv4 and IPv6
 * without extension headers, first fragments, complete 20-byte TCP
 * header) and clamps an MSS option above MSS_MAX to MSS_MAX, updating the
 * TCP checksum incrementally (a field at an odd offset from the TCP
 * header counts byte-swapped). An option whose length is below 2 drops
 * the packet, as does an option read beyond the end of the packet (the
 * script's fault action). Counters: 0 SYNs, 1 MSS options found, 2
 * clamped, 3 options walked.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MSS_MAX 1400

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&seen, &what);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline __u16 swap16(__u16 w)
{
	return (w >> 8) | (w << 8);
}

/* The option walk, one option per bpf_loop round (the verifier checks
 * one round instead of every path through up to 40 options). */
struct walk {
	__u8 *data;
	__u8 *end;
	struct tcphdr *th;
	__u32 tcp;
	__u32 hlen;
	__u32 off;
	int verdict;
};

static long walk_one(__u32 round, struct walk *w)
{
	__u8 *data = w->data, *end = w->end, *o, kind, size;
	__u32 off = w->off;

	if (off >= w->hlen || off >= 60)
		return 1;
	count(3);
	o = data + (w->tcp & 0xff) + (off & 0x3f);
	if (o + 1 > end) {
		w->verdict = XDP_DROP;
		return 1;
	}
	kind = o[0];
	if (kind == 0)
		return 1;
	if (kind == 1) {
		w->off = off + 1;
		return 0;
	}
	if (o + 2 > end) {
		w->verdict = XDP_DROP;
		return 1;
	}
	size = o[1];
	if (size < 2) {
		w->verdict = XDP_DROP;
		return 1;
	}
	if (kind == 2 && size == 4) {
		struct tcphdr *th = w->th;
		__u16 mss, old_w, new_w;
		__u32 csum;

		count(1);
		if (o + 4 > end || (void *)(th + 1) > (void *)end) {
			w->verdict = XDP_DROP;
			return 1;
		}
		mss = ((__u16)o[2] << 8) | o[3];
		if (mss > MSS_MAX) {
			count(2);
			old_w = mss;
			new_w = MSS_MAX;
			if (off & 1) {
				old_w = swap16(old_w);
				new_w = swap16(new_w);
			}
			csum = (__u16)~bpf_ntohs(th->check);
			csum += (__u16)~old_w + (__u32)new_w;
			csum = (csum & 0xffff) + (csum >> 16);
			csum = (csum & 0xffff) + (csum >> 16);
			th->check = bpf_htons((__u16)~csum);
			o[2] = MSS_MAX >> 8;
			o[3] = MSS_MAX & 0xff;
		}
		return 1;
	}
	w->off = off + size;
	return 0;
}

SEC("xdp") int tcp_options(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = (void *)data;
	struct tcphdr *th;
	struct walk w;
	__u32 tcp;

	if ((void *)(eth + 1) > (void *)end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > (void *)end || ip->version != 4 || ip->ihl < 5 ||
		    ip->protocol != IPPROTO_TCP || (ip->frag_off & bpf_htons(0x1fff)))
			return XDP_PASS;
		tcp = ETH_HLEN + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > (void *)end || ip6->version != 6 ||
		    ip6->nexthdr != IPPROTO_TCP)
			return XDP_PASS;
		tcp = ETH_HLEN + sizeof(*ip6);
	} else {
		return XDP_PASS;
	}
	th = (void *)(data + tcp);
	if ((void *)(th + 1) > (void *)end)
		return XDP_PASS;
	if (!th->syn)
		return XDP_PASS;
	count(0);
	w.data = data;
	w.end = end;
	w.th = th;
	w.tcp = tcp;
	w.hlen = th->doff * 4;
	w.off = 20;
	w.verdict = XDP_PASS;
	/* At most 40 rounds: off grows by at least 1 and stays below hlen <= 60
	 * (so the script's LOOP_CAP of 40 is never reached). */
	bpf_loop(40, walk_one, &w, 0);
	return w.verdict;
}

char _license[] SEC("license") = "GPL";
