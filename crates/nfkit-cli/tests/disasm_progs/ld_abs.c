/* A socket filter with legacy packet loads (ld_abs / ld_ind). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

unsigned long long load_byte(void *skb, unsigned long long off) asm("llvm.bpf.load.byte");
unsigned long long load_half(void *skb, unsigned long long off) asm("llvm.bpf.load.half");
unsigned long long load_word(void *skb, unsigned long long off) asm("llvm.bpf.load.word");

SEC("socket")
int ldabs(struct __sk_buff *skb)
{
	if (load_half(skb, 12) != ETH_P_IP)
		return 0;
	__u32 ihl = (load_byte(skb, 14) & 0xf) * 4;
	return load_word(skb, 14 + ihl) ? skb->len : 0;
}

char LICENSE[] SEC("license") = "GPL";
