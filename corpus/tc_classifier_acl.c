/* TC (legacy "classifier" section): an ACL on (source, protocol,
 * destination port) in a hash map with a struct key, looked up after a
 * bounded walk over at most two VLAN tags; per-flow counters in an LRU
 * per-CPU hash; the default action in .data. Headers are read with
 * bpf_skb_load_bytes. */
#include "common.h"

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

struct acl_key {
	__u32 saddr;
	__u16 dport;
	__u8 proto;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct acl_key);
	__type(value, __u32);
} acl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct acl_key);
	__type(value, __u64);
} acl_hits SEC(".maps");

int default_action = TC_ACT_OK;

SEC("classifier")
int tc_classifier_acl(struct __sk_buff *skb)
{
	__u32 off = ETH_HLEN;
	__be16 proto = skb->protocol;
	for (int i = 0; i < 2; i++) {
		struct vlan_hdr vh;
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		if (bpf_skb_load_bytes(skb, off, &vh, sizeof(vh)) < 0)
			return default_action;
		proto = vh.proto;
		off += sizeof(vh);
	}
	if (proto != bpf_htons(ETH_P_IP))
		return default_action;
	struct iphdr ip;
	if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)) < 0)
		return default_action;
	struct acl_key key = {.saddr = ip.saddr, .proto = ip.protocol};
	if (ip.protocol == IPPROTO_TCP || ip.protocol == IPPROTO_UDP) {
		__be16 ports[2];
		if (bpf_skb_load_bytes(skb, off + ip.ihl * 4, ports, sizeof(ports)) < 0)
			return default_action;
		key.dport = bpf_ntohs(ports[1]);
	}
	__u32 *action = bpf_map_lookup_elem(&acl, &key);
	if (!action)
		return default_action;
	__u64 one = 1, *hits = bpf_map_lookup_elem(&acl_hits, &key);
	if (hits)
		*hits += 1;
	else
		bpf_map_update_elem(&acl_hits, &key, &one, BPF_NOEXIST);
	return *action;
}

char LICENSE[] SEC("license") = "GPL";
