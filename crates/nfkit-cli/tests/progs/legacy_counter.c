// Programs in legacy sections (no type in the name) for `nfkit deploy
// FILE.o --type ...`: count frames by UDP destination port, drop port 9.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} by_port SEC(".maps");

static __always_inline int count(void *data, void *end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return 0;
	__u32 port = bpf_ntohs(udp->dest);
	__u64 one = 1, *n = bpf_map_lookup_elem(&by_port, &port);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&by_port, &port, &one, BPF_NOEXIST);
	return port == 9;
}

SEC("xdp_counter")
int count_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	return count(data, end) ? XDP_DROP : XDP_PASS;
}

SEC("prog")
int tc_count(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	return count(data, end) ? 2 /* TC_ACT_SHOT */ : 0 /* TC_ACT_OK */;
}

SEC("socket")
int sock_all(struct __sk_buff *skb)
{
	return skb->len;
}

char LICENSE[] SEC("license") = "GPL";
