/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module parse
 * @hooks xdp tc socket
 * Header fields of the packet, read from the parse-once info block (no
 * packet access, no re-parsing). IPv4 and IPv6; up to two VLAN tags and six
 * IPv6 extension headers are skipped by the parser.
 */
#include "nfkit.h"

/**
 * @nf ip_version()
 * The IP version of the packet.
 * @returns 4 for IPv4, 6 for IPv6, 0 for anything else (or a truncated IP header).
 * @maps none
 * @bad no arguments.
 */
NF(ip_version)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return pi->ip_version;
}
NF_EXPORT(ip_version);

/**
 * @nf l4_proto()
 * The transport protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, 132 SCTP, ...).
 * @returns the IPv4 protocol / the IPv6 next header after the extension
 *          headers; 0 for a packet that is not IP.
 * @maps none
 * @bad no arguments.
 */
NF(l4_proto)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return pi->l4_proto;
}
NF_EXPORT(l4_proto);

/**
 * @nf src_port()
 * The TCP, UDP or SCTP source port.
 * @returns the port (host order, 0..65535); 0 when the packet has no ports
 *          (other protocols, non-first fragments, truncated headers).
 * @maps none
 * @bad no arguments.
 */
NF(src_port)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return pi->sport;
}
NF_EXPORT(src_port);

/**
 * @nf dst_port()
 * The TCP, UDP or SCTP destination port.
 * @returns the port (host order, 0..65535); 0 when the packet has no ports.
 * @maps none
 * @bad no arguments.
 */
NF(dst_port)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return pi->dport;
}
NF_EXPORT(dst_port);

/**
 * @nf dscp()
 * The DSCP of the IPv4 TOS / IPv6 traffic class.
 * @returns 0..63; 0 for a packet that is not IP.
 * @maps none
 * @bad no arguments.
 */
NF(dscp)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return pi->tos >> 2;
}
NF_EXPORT(dscp);

/**
 * @nf pkt_len()
 * The packet's length at the hook: the whole frame on XDP (linear part) and
 * TC (skb->len), from the network header on socket filters.
 * @returns the length in bytes.
 * @maps none
 * @bad no arguments.
 */
NF(pkt_len)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return pi->pkt_len;
}
NF_EXPORT(pkt_len);
