/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module meter
 * @hooks xdp tc
 * Token buckets per destination, per source, per (source, destination)
 * address (IPv4 and IPv6; non-IP packets share the bucket of the all-zero
 * address). One bucket per address and (rate, burst) pair: calls with
 * other parameters meter independently.
 *
 * Exact integer arithmetic, no drift: a bucket holds tokens in units of
 * 10^-9 token; a new bucket starts full (burst tokens); between two packets
 * that are e ns apart it gains e * rate units (so exactly rate tokens per
 * second), up to burst tokens; a packet that finds at least one whole token
 * takes it and is in profile. So at one instant a fresh bucket lets exactly
 * burst packets through. A bucket is updated under its bpf_spin_lock, so
 * concurrent CPUs never lose or duplicate a token. (Socket filters may not
 * take spin locks, so this module is built for XDP and TC only.)
 * @const TB_IN_PROFILE the result for a packet within the rate (0)
 * @const TB_OUT_OF_PROFILE the result for a packet over the rate (1)
 * @const TB_MAX largest rate and burst; larger values are clamped to it
 * @map nf_meter_tb_dst hash (65536): {dst addr[16], rate u32, burst u32} -> {spin lock, tokens (10^-9), last_ns}
 * @map nf_meter_tb_src hash (65536): {src addr[16], rate u32, burst u32} -> same value
 * @map nf_meter_tb_srcdst hash (65536): {src addr[16], dst addr[16], rate u32, burst u32} -> same value
 */
#include "nfkit.h"

#define NF_TB_IN_PROFILE 0
#define NF_TB_OUT_OF_PROFILE 1
#define NF_TB_MAX 0xffffffff
#define NF_TB_UNIT 1000000000ULL
#define NF_TB_ENTRIES 65536

struct nf_tb_val {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 tokens;  /* 10^-9 tokens */
	__u64 last_ns; /* time of the last refill */
};

struct nf_tb_key1 {
	__u8 addr[16];
	__u32 rate;
	__u32 burst;
};

struct nf_tb_key2 {
	__u8 src[16];
	__u8 dst[16];
	__u32 rate;
	__u32 burst;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NF_TB_ENTRIES);
	__type(key, struct nf_tb_key1);
	__type(value, struct nf_tb_val);
} nf_meter_tb_dst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NF_TB_ENTRIES);
	__type(key, struct nf_tb_key1);
	__type(value, struct nf_tb_val);
} nf_meter_tb_src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NF_TB_ENTRIES);
	__type(key, struct nf_tb_key2);
	__type(value, struct nf_tb_val);
} nf_meter_tb_srcdst SEC(".maps");

static __always_inline __u64 nf__tb(void *map, void *key, __u64 rate, __u64 burst)
{
	struct nf_tb_val *v;
	__u64 now = nf_now(), full = burst * NF_TB_UNIT, elapsed, room, out;

	v = bpf_map_lookup_elem(map, key);
	if (!v) {
		struct nf_tb_val nv = { .tokens = full, .last_ns = now };
		bpf_map_update_elem(map, key, &nv, BPF_NOEXIST); /* EEXIST: another CPU won */
		v = bpf_map_lookup_elem(map, key);
		if (!v)
			return NF_TB_OUT_OF_PROFILE; /* table full */
	}
	bpf_spin_lock(&v->lock);
	elapsed = now > v->last_ns ? now - v->last_ns : 0;
	v->last_ns = now;
	room = full - v->tokens;
	if (elapsed > room / rate)
		v->tokens = full;
	else
		v->tokens += elapsed * rate;
	if (v->tokens >= NF_TB_UNIT) {
		v->tokens -= NF_TB_UNIT;
		out = NF_TB_IN_PROFILE;
	} else {
		out = NF_TB_OUT_OF_PROFILE;
	}
	bpf_spin_unlock(&v->lock);
	return out;
}

/**
 * @nf tb_dst(rate, burst)
 * Token bucket of the packet's destination address.
 * @arg rate tokens (packets) added per second
 * @arg burst bucket size in tokens; a new bucket starts full
 * @returns TB_IN_PROFILE (0) when the packet took a token, TB_OUT_OF_PROFILE (1) when the bucket was empty.
 * @maps nf_meter_tb_dst
 * @bad rate == 0 or burst == 0: 1 for every packet, nothing stored.
 *      rate or burst > TB_MAX (2^32 - 1): clamped to TB_MAX. A full table:
 *      1 for packets of addresses without a bucket. A clock that steps back
 *      refills nothing and refills from the new time on.
 */
NF(tb_dst, rate, burst)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_tb_key1 k;

	if (!pi)
		return NF_FAULT;
	if (!rate || !burst)
		return NF_TB_OUT_OF_PROFILE;
	__builtin_memcpy(k.addr, pi->dst, 16);
	k.rate = rate > NF_TB_MAX ? NF_TB_MAX : rate;
	k.burst = burst > NF_TB_MAX ? NF_TB_MAX : burst;
	return nf__tb(&nf_meter_tb_dst, &k, k.rate, k.burst);
}
NF_EXPORT(tb_dst);

/**
 * @nf tb_src(rate, burst)
 * Token bucket of the packet's source address.
 * @arg rate tokens (packets) added per second
 * @arg burst bucket size in tokens; a new bucket starts full
 * @returns TB_IN_PROFILE (0) when the packet took a token, TB_OUT_OF_PROFILE (1) when the bucket was empty.
 * @maps nf_meter_tb_src
 * @bad as tb_dst: rate == 0 or burst == 0 gives 1 and stores nothing;
 *      values above TB_MAX are clamped; a full table gives 1.
 */
NF(tb_src, rate, burst)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_tb_key1 k;

	if (!pi)
		return NF_FAULT;
	if (!rate || !burst)
		return NF_TB_OUT_OF_PROFILE;
	__builtin_memcpy(k.addr, pi->src, 16);
	k.rate = rate > NF_TB_MAX ? NF_TB_MAX : rate;
	k.burst = burst > NF_TB_MAX ? NF_TB_MAX : burst;
	return nf__tb(&nf_meter_tb_src, &k, k.rate, k.burst);
}
NF_EXPORT(tb_src);

/**
 * @nf tb_srcdst(rate, burst)
 * Token bucket of the packet's (source, destination) address pair.
 * @arg rate tokens (packets) added per second
 * @arg burst bucket size in tokens; a new bucket starts full
 * @returns TB_IN_PROFILE (0) when the packet took a token, TB_OUT_OF_PROFILE (1) when the bucket was empty.
 * @maps nf_meter_tb_srcdst
 * @bad as tb_dst: rate == 0 or burst == 0 gives 1 and stores nothing;
 *      values above TB_MAX are clamped; a full table gives 1.
 */
NF(tb_srcdst, rate, burst)
{
	struct nf_pkt_info *pi = nf_info(ctx);
	struct nf_tb_key2 k;

	if (!pi)
		return NF_FAULT;
	if (!rate || !burst)
		return NF_TB_OUT_OF_PROFILE;
	__builtin_memcpy(k.src, pi->src, 32);
	k.rate = rate > NF_TB_MAX ? NF_TB_MAX : rate;
	k.burst = burst > NF_TB_MAX ? NF_TB_MAX : burst;
	return nf__tb(&nf_meter_tb_srcdst, &k, k.rate, k.burst);
}
NF_EXPORT(tb_srcdst);
