/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module sets
 * @hooks xdp tc socket
 * Address sets with expiry (blacklists, whitelists, seen-sets): by source,
 * by destination, by (source, destination) address pair, IPv4 and IPv6
 * (non-IP packets have the all-zero address). An entry is a member while
 * nf_now() < its expiry time. Entries are single u64 expiry times written
 * with one store or one map update, so concurrent CPUs never see a torn
 * entry; a full set evicts its least recently used entry.
 * @const SET_LOOKUP op 0: is the address a member?
 * @const SET_ADD op 1: add it (or reset its expiry) with expiry now + ttl
 * @const SET_DELETE op 2: remove it
 * @const SET_LOOKUP_REFRESH op 3: is it a member? if so, reset its expiry to now + ttl
 * @const SET_NO_EXPIRY the expiry time stored for ttl 0 (never expires)
 * @map nf_sets_src LRU hash (65536): src addr[16] -> u64 expiry (ns, nf_now() clock)
 * @map nf_sets_dst LRU hash (65536): dst addr[16] -> u64 expiry
 * @map nf_sets_srcdst LRU hash (65536): {src addr[16], dst addr[16]} -> u64 expiry
 */
#include "nfkit.h"

#define NF_SET_LOOKUP 0
#define NF_SET_ADD 1
#define NF_SET_DELETE 2
#define NF_SET_LOOKUP_REFRESH 3
#define NF_SET_NO_EXPIRY 0xffffffffffffffff
#define NF_SET_ENTRIES 65536

/* Keys: addresses as nf_pkt_info holds them (IPv6, or IPv4-mapped
 * ::ffff:a.b.c.d), so tools show them as addresses (docs/abi.md, "Map
 * keys and values"); values: the expiry time, a u64 on nf_now()'s clock. */
struct nf_set_key {
	__u8 addr[16];
};

struct nf_set_pair_key {
	__u8 src[16];
	__u8 dst[16];
};

typedef __u64 nf_set_expiry;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_SET_ENTRIES);
	__type(key, struct nf_set_key);
	__type(value, nf_set_expiry);
} nf_sets_src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_SET_ENTRIES);
	__type(key, struct nf_set_key);
	__type(value, nf_set_expiry);
} nf_sets_dst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NF_SET_ENTRIES);
	__type(key, struct nf_set_pair_key);
	__type(value, nf_set_expiry);
} nf_sets_srcdst SEC(".maps");

static __always_inline __u64 nf__set(void *map, void *key, __u64 op, __u64 ttl)
{
	__u64 now, exp, *v, member;

	if (op > NF_SET_LOOKUP_REFRESH)
		return 0;
	now = nf_now();
	exp = (ttl == 0 || now + ttl < now) ? NF_SET_NO_EXPIRY : now + ttl;
	v = bpf_map_lookup_elem(map, key);
	member = v && now < *v;
	if (op == NF_SET_ADD) {
		if (v)
			*v = exp;
		else
			bpf_map_update_elem(map, key, &exp, BPF_ANY);
	} else if (op == NF_SET_DELETE) {
		if (v)
			bpf_map_delete_elem(map, key);
	} else if (op == NF_SET_LOOKUP_REFRESH) {
		if (member)
			*v = exp;
	}
	return member;
}

/**
 * @nf src_set(op, ttl)
 * Membership of the packet's source address.
 * @arg op SET_LOOKUP (0), SET_ADD (1), SET_DELETE (2) or SET_LOOKUP_REFRESH (3)
 * @arg ttl lifetime in ns for SET_ADD and SET_LOOKUP_REFRESH (0: never expires); ignored by the other ops
 * @returns 1 if the address was a member before the call, else 0 (for every op).
 * @maps nf_sets_src
 * @bad op > 3: 0, nothing changes. now + ttl past 2^64 - 1: never expires.
 */
NF(src_set, op, ttl)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return nf__set(&nf_sets_src, pi->src, op, ttl);
}
NF_EXPORT(src_set);

/**
 * @nf dst_set(op, ttl)
 * Membership of the packet's destination address.
 * @arg op SET_LOOKUP (0), SET_ADD (1), SET_DELETE (2) or SET_LOOKUP_REFRESH (3)
 * @arg ttl lifetime in ns for SET_ADD and SET_LOOKUP_REFRESH (0: never expires); ignored by the other ops
 * @returns 1 if the address was a member before the call, else 0 (for every op).
 * @maps nf_sets_dst
 * @bad op > 3: 0, nothing changes. now + ttl past 2^64 - 1: never expires.
 */
NF(dst_set, op, ttl)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return nf__set(&nf_sets_dst, pi->dst, op, ttl);
}
NF_EXPORT(dst_set);

/**
 * @nf srcdst_set(op, ttl)
 * Membership of the packet's (source, destination) address pair.
 * @arg op SET_LOOKUP (0), SET_ADD (1), SET_DELETE (2) or SET_LOOKUP_REFRESH (3)
 * @arg ttl lifetime in ns for SET_ADD and SET_LOOKUP_REFRESH (0: never expires); ignored by the other ops
 * @returns 1 if the pair was a member before the call, else 0 (for every op).
 * @maps nf_sets_srcdst
 * @bad op > 3: 0, nothing changes. now + ttl past 2^64 - 1: never expires.
 */
NF(srcdst_set, op, ttl)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi)
		return NF_FAULT;
	return nf__set(&nf_sets_srcdst, pi->src, op, ttl);
}
NF_EXPORT(srcdst_set);
