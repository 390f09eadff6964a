/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Calls the catalogue's dpi NF (nf/dpi.c, included) on each packet with
 * the set and limit in probe_args[0..1] and leaves its result in
 * probe_out[0]. Built per hook (-DNF_HOOK_XDP / -DNF_HOOK_TC); -DPROBE_FRAGS makes
 * the XDP probe multi-buffer (xdp.frags), for jumbo frames. */
#include "nfkit.h"
#include "dpi.c"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} probe_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} probe_out SEC(".maps");

#if NF_HOOK_ID == NF_HOOKID_XDP && defined(PROBE_FRAGS)
#define PROBE_SEC "xdp.frags"
#elif NF_HOOK_ID == NF_HOOKID_XDP
#define PROBE_SEC "xdp"
#else
#define PROBE_SEC "tc"
#endif

SEC(PROBE_SEC) int probe(NF_CTX *ctx)
{
	__u32 k0 = 0, k1 = 1;
	__u64 *set = bpf_map_lookup_elem(&probe_args, &k0);
	__u64 *limit = bpf_map_lookup_elem(&probe_args, &k1);
	__u64 *out = bpf_map_lookup_elem(&probe_out, &k0);
	__u64 r;

	if (!set || !limit || !out || !nf_enter(ctx))
		return 0;
	r = nf_match(ctx, *set, *limit, 0, 0);
	nf_leave();
	*out = r;
	return 0;
}
