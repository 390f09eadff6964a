/* TCP destination NAT, clang-built: a segment to 198.18.0.1 port 8080
 * gets destination 198.18.0.2 port 80, with both checksums updated
 * incrementally (RFC 1624: the IPv4 header's for the address, the TCP
 * checksum for the address in its pseudo-header and the port), and is
 * sent back out (TX). The same for UDP to port 5353 (the UDP checksum
 * fix-up stays in software). Everything else passes. */
#include "common.h"
#include "csum.h"

SEC("xdp")
int tcpnat(struct xdp_md *ctx)
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
	if (ip->protocol == IPPROTO_UDP) {
		/* The same NAT for UDP to port 5353 (-> 53): its checksum
		 * fix-up has no exact flower/u32 form (software). */
		struct udphdr *udp = (void *)(ip + 1);
		if (!IN_PKT(udp, sizeof(*udp), end))
			return XDP_PASS;
		if (ip->daddr != bpf_htonl(0xc6120001) ||
		    udp->dest != bpf_htons(5353) || !udp->check)
			return XDP_PASS;
		__u16 o = bpf_htons(5353), n = bpf_htons(53);
		udp->dest = n;
		udp->check = csum_fold((__u16)~udp->check + (__u16)~o + n);
		return XDP_TX;
	}
	if (ip->protocol != IPPROTO_TCP)
		return XDP_PASS;
	struct tcphdr *tcp = (void *)(ip + 1);
	if (!IN_PKT(tcp, sizeof(*tcp), end))
		return XDP_PASS;
	if (ip->daddr != bpf_htonl(0xc6120001) || tcp->dest != bpf_htons(8080))
		return XDP_PASS;
	__u16 a_old = bpf_htons(0x0001), a_new = bpf_htons(0x0002);
	__u16 p_old = bpf_htons(8080), p_new = bpf_htons(80);
	/* Only the low half of the address changes. */
	ip->daddr = bpf_htonl(0xc6120002);
	ip->check = csum_fold((__u16)~ip->check + (__u16)~a_old + a_new);
	tcp->dest = p_new;
	tcp->check = csum_fold((__u16)~tcp->check + (__u16)~a_old + a_new +
			       (__u16)~p_old + p_new);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
