/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module l2
 * @hooks xdp tc
 * Layer-2 patching between ports.
 * @map nf_l2_xconnect hash (1024): ingress ifindex u32 -> peer ifindex u32 (store both directions for a bidirectional patch)
 */
#include "nfkit.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} nf_l2_xconnect SEC(".maps");

/**
 * @nf xconnect()
 * Cross-connect: send the packet out of the port paired with its ingress port.
 * @returns the verdict REDIRECT(peer) when the ingress port has a pair; the
 *          value 0 when it has none.
 * @maps nf_l2_xconnect
 * @bad no arguments. A pair whose peer is 0: the value 0.
 */
NF(xconnect)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	__u32 *peer;

	if (!pi)
		return NF_FAULT;
	peer = bpf_map_lookup_elem(&nf_l2_xconnect, &pi->ifindex);
	if (!peer || !*peer)
		return 0;
	return NF_REDIRECT(*peer);
}
NF_EXPORT(xconnect);
