/* Redirects through a devmap with constant keys: UDP to port 4789 out of
 * the port in slot 0, TCP to port 179 out of slot 1 (no entry: the
 * flags' fallback, XDP_DROP), everything else passes. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

SEC("xdp")
int devmap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end))
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end) || ip->ihl != 5)
		return XDP_PASS;
	struct udphdr *udp = (void *)(ip + 1);
	if (!IN_PKT(udp, sizeof(*udp), end))
		return XDP_PASS;
	if (ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(4789))
		return bpf_redirect_map(&tx_ports, 0, 0);
	if (ip->protocol == IPPROTO_TCP && udp->dest == bpf_htons(179))
		return bpf_redirect_map(&tx_ports, 1, XDP_DROP);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
