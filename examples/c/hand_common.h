/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What the hand-written examples in examples/c share: the clock.
 *
 * Like nf_now(), now_ns() is the `now_ns` of map nfkit_config (same
 * layout as nfkit's struct nf_config) when `clock_pinned` is set, else
 * the kernel's clock, so tests and benchmarks pin it the same way for the
 * hand C and the compiled scripts.
 */
#ifndef NFKIT_HAND_COMMON_H
#define NFKIT_HAND_COMMON_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct config {
	__u64 default_action;
	__u64 fault_action;
	__u32 controller_ifindex;
	__u32 clock_pinned;
	__u64 now_ns;
	__u64 rand_seed;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} nfkit_config SEC(".maps");

static __always_inline __u64 now_ns(void)
{
	__u32 k = 0;
	struct config *c = bpf_map_lookup_elem(&nfkit_config, &k);
	if (c && c->clock_pinned)
		return c->now_ns;
	return bpf_ktime_get_ns();
}

#endif
