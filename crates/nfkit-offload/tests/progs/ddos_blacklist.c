/* The DDoS example's logic (examples/c/ddos_common.h: parsing, token
 * buckets, the expiring blacklist the data path fills, the verdict
 * counters) with the blacklist step drop-only: a blacklisted source is
 * always dropped and counted (the example also redirects one packet in
 * SAMPLE per flow to a collector, which is per-flow state: those
 * packets must reach the program, so that form offloads nothing).
 * Everything else is as in examples/c/ddos.c. */
#include "../../../../examples/c/hand_common.h"
#include "../../../../examples/c/ddos_common.h"

SEC("xdp") int ddos_blacklist(struct xdp_md *ctx)
{
	struct flow f = {};
	__u64 now = now_ns();
	__u64 *exp;

	parse(ctx, &f);
	exp = bpf_map_lookup_elem(&blacklist, f.src);
	if (exp && now < *exp) {
		count(DROPPED);
		return XDP_DROP;
	}
	if (take(&dst_buckets, f.dst, DST_RATE, DST_BURST, now)) {
		count(PASSED);
		return XDP_PASS;
	}
	return pair_step(&f, now);
}

char _license[] SEC("license") = "GPL";
