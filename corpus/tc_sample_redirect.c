/* TC: flows (by IPv4 source) listed in an LRU hash are redirected to
 * the interface stored there; a random 1-in-N sample of the rest is
 * time-stamped in a per-CPU hash (bpf_ktime_get_ns, bpf_get_prandom_u32). */
#include "common.h"

const volatile __u32 sample_every = 16;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} redirect_to SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} sampled_at SEC(".maps");

SEC("tc")
int tc_sample_redirect(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if (!IN_PKT(eth, sizeof(*eth), end) || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	struct iphdr *ip = (void *)(eth + 1);
	if (!IN_PKT(ip, sizeof(*ip), end))
		return TC_ACT_SHOT;
	__u32 src = ip->saddr;
	__u32 *ifindex = bpf_map_lookup_elem(&redirect_to, &src);
	if (ifindex)
		return bpf_redirect(*ifindex, 0);
	if (sample_every && bpf_get_prandom_u32() % sample_every == 0) {
		__u64 now = bpf_ktime_get_ns();
		bpf_map_update_elem(&sampled_at, &src, &now, BPF_ANY);
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
