/* Shared includes and small packet helpers for the nfkit C corpus. */
#ifndef NFKIT_CORPUS_COMMON_H
#define NFKIT_CORPUS_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* ICMP header (linux/icmp.h drags in libc headers). */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id;
	__be16 sequence;
};
#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8

/* Bounds check: is [p, p + n) inside the packet? */
#define IN_PKT(p, n, end) ((void *)(p) + (n) <= (void *)(end))

#endif
