/* XDP: a bounded loop sums up to 64 bytes of UDP payload; packets whose
 * sum is divisible by 7 are dropped, the others get the 16-bit sum
 * written into the first two payload bytes and pass. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_sum SEC(".maps");

SEC("xdp")
int xdp_payload_sum(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end) || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end) || ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return XDP_PASS;
	struct udphdr *udp = (void *)(ip + 1);
	if (!IN_PKT(udp, sizeof(*udp), end))
		return XDP_PASS;
	__u8 *payload = (void *)(udp + 1);
	__u32 sum = 0;
	for (int i = 0; i < 64; i++) {
		if (!IN_PKT(payload + i, 1, end))
			break;
		sum += payload[i];
	}
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&last_sum, &zero);
	if (last)
		*last = sum;
	if (sum % 7 == 0)
		return XDP_DROP;
	if (!IN_PKT(payload, 2, end))
		return XDP_PASS;
	payload[0] = sum >> 8;
	payload[1] = sum & 0xff;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
