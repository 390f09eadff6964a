/* TC helpers: load/store bytes, checksum diff, redirect. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int skbh(struct __sk_buff *skb)
{
	__u8 b[4];
	if (bpf_skb_load_bytes(skb, 26, b, sizeof(b)))
		return TC_ACT_OK;
	__u32 old = *(__u32 *)b, new = old ^ 0x01010101;
	__s64 d = bpf_csum_diff(&old, 4, &new, 4, 0);
	bpf_skb_store_bytes(skb, 26, &new, 4, 0);
	bpf_l4_csum_replace(skb, 40, 0, d, BPF_F_PSEUDO_HDR);
	return d & 1 ? bpf_redirect(2, 0) : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
