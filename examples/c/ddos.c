/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * examples/ddos.py written by hand as one ordinary XDP program: the
 * baseline that the compiled chain is measured against (`make bench`).
 *
 * Same logic, packet by packet: a blacklisted source (expiry in the
 * future) is dropped, except one packet in SAMPLE of each flow (its
 * packets number 1, SAMPLE + 1, ...) redirected to COLLECTOR; otherwise
 * the destination's token bucket (DST_RATE/s, DST_BURST) passes the
 * packet when it has a token; else the (source, destination) bucket
 * (PAIR_RATE/s, PAIR_BURST) passes it when it has one, and when it has
 * none the source is blacklisted for BLACKLIST_NS and the packet dropped.
 * Constants, maps, parsing, buckets and sampling are in ddos_common.h
 * (shared with nfkit-bench's tail-call pipeline of the same logic).
 *
 * Time: like nf_now(), the `now_ns` of map nfkit_config (same layout as
 * nfkit's struct nf_config) when `clock_pinned` is set, else the kernel's
 * clock, so tests and benchmarks pin it the same way for both programs
 * (hand_common.h).
 */
#include "hand_common.h"
#include "ddos_common.h"

SEC("xdp") int ddos(struct xdp_md *ctx)
{
	struct flow f = {};
	__u64 now = now_ns();
	int act;

	parse(ctx, &f);
	act = blacklisted(&f, now);
	if (act >= 0)
		return act;
	if (take(&dst_buckets, f.dst, DST_RATE, DST_BURST, now)) {
		count(PASSED);
		return XDP_PASS;
	}
	return pair_step(&f, now);
}

char _license[] SEC("license") = "GPL";
