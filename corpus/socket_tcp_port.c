/* Socket filter: keep TCP segments to the port configured in .rodata
 * (whole packet), truncate other TCP to 64 bytes, drop the rest. Reads
 * the headers with the legacy packet loads (LD_ABS / LD_IND). */
#include "common.h"

const volatile __u16 keep_port = 80;
const volatile __u32 snap_len = 64;

unsigned long long load_byte(void *skb, unsigned long long off) asm("llvm.bpf.load.byte");
unsigned long long load_half(void *skb, unsigned long long off) asm("llvm.bpf.load.half");

SEC("socket")
int socket_tcp_port(struct __sk_buff *skb)
{
	/* Socket filters see the packet from the network header. */
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return 0;
	if (load_byte(skb, offsetof(struct iphdr, protocol)) != IPPROTO_TCP)
		return 0;
	__u32 ihl = (load_byte(skb, 0) & 0x0f) * 4;
	__u16 dport = load_half(skb, ihl + offsetof(struct tcphdr, dest));
	if (dport == keep_port)
		return skb->len;
	return snap_len;
}

char LICENSE[] SEC("license") = "GPL";
