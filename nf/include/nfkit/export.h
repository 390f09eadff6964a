/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nfkit/export.h - declaring NFs (NF), turning results into hook return
 * codes and counting them (nf_resolve, nf_action, nf_finish), and
 * exporting an NF as a standalone program and a dynamic entry
 * (NF_EXPORT). Included by nfkit.h.
 */
#ifndef NFKIT_EXPORT_H
#define NFKIT_EXPORT_H

#include "parse.h"

/* ------------------------------------------------------------------ */
/* Declaring an NF.
 *
 *   NF(name)                    __u64 nf_name(NF_CTX *ctx, _a1, _a2, _a3, _a4)
 *   NF(name, a)                 ... (ctx, a, _a2, _a3, _a4)
 *   NF(name, a, b, c, d)        ... (ctx, a, b, c, d)
 *
 * Arguments are __u64. Unused slots are named _a1.._a4; tools read the
 * arity from the BTF parameter names (a leading '_' marks an unused slot).
 * noinline + weak keeps all five parameters and the result through clang's
 * dead-argument elimination and constant propagation: a weak function may
 * be replaced at link time, so clang can assume nothing about it. */

#define NF__NARGS(...) NF__NARGS_(_, ##__VA_ARGS__, 4, 3, 2, 1, 0)
#define NF__NARGS_(_0, _1, _2, _3, _4, N, ...) N
#define NF__CAT(a, b) NF__CAT_(a, b)
#define NF__CAT_(a, b) a##b
#define NF__P0() __u64 _a1, __u64 _a2, __u64 _a3, __u64 _a4
#define NF__P1(a) __u64 a, __u64 _a2, __u64 _a3, __u64 _a4
#define NF__P2(a, b) __u64 a, __u64 b, __u64 _a3, __u64 _a4
#define NF__P3(a, b, c) __u64 a, __u64 b, __u64 c, __u64 _a4
#define NF__P4(a, b, c, d) __u64 a, __u64 b, __u64 c, __u64 d

#define NF_FUNC __attribute__((noinline, weak))
#define NF(name, ...) \
	NF_FUNC __u64 nf_##name(NF_CTX *ctx, NF__CAT(NF__P, NF__NARGS(__VA_ARGS__))(__VA_ARGS__))

/* ------------------------------------------------------------------ */
/* Results into hook return codes (the table of abi.md section 1). */

static __always_inline void nf__count_fault(void)
{
	__u32 k = 0;
	__u64 *f = bpf_map_lookup_elem(&nfkit_faults, &k);
	if (f)
		*f += 1;
}

/* The verdict a result stands for: a verdict itself; a plain value gives
 * the default action; a fault the fault action (and counts the fault). */
static __always_inline __u64 nf_resolve(__u64 r)
{
	struct nf_config *c;
	__u64 v;
	if (nf_is_verdict(r))
		return r;
	c = nf_config();
	if (nf_is_value(r)) {
		v = c ? c->default_action : 0;
		return nf_is_verdict(v) ? v : NF_PASS;
	}
	nf__count_fault();
	v = c ? c->fault_action : 0;
	return nf_is_verdict(v) ? v : NF_DROP;
}

/* What entry programs return: the hook's return code, or for the
 * software switch the resolved verdict itself (the switch reads action and
 * argument from r0). */
#if defined(NF_HOOK_SWITCH)
#define NF_RET __u64
#else
#define NF_RET int
#endif

#if defined(NF_HOOK_SWITCH)
static __always_inline __u64 nf_action(NF_CTX *ctx, __u64 r)
{
	(void)ctx;
	return nf_resolve(r);
}
#elif NF_HOOK_ID == NF_HOOKID_XDP
static __always_inline int nf_action(NF_CTX *ctx, __u64 r)
{
	__u64 v = nf_resolve(r);
	__u32 arg = nf_verdict_arg(v);
	switch (nf_verdict_action(v)) {
	case NF_ACT_DROP:
		return XDP_DROP;
	case NF_ACT_PASS:
	case NF_ACT_HOST:
		return XDP_PASS;
	case NF_ACT_TX:
		return XDP_TX;
	case NF_ACT_REDIRECT:
		return bpf_redirect(arg, 0);
	case NF_ACT_FLOOD:
		return bpf_redirect_map(&nfkit_flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	case NF_ACT_CONTROLLER:
		if (bpf_xdp_adjust_meta(ctx, -4) == 0) {
			void *meta = (void *)(long)ctx->data_meta;
			void *data = (void *)(long)ctx->data;
			if (meta + 4 <= data)
				*(__u32 *)meta = NF_CONTROLLER_TAG | (arg & 0xffff);
		}
		return XDP_PASS;
	default:
		return XDP_ABORTED;
	}
}
#elif NF_HOOK_ID == NF_HOOKID_TC
static __always_inline int nf_action(NF_CTX *ctx, __u64 r)
{
	__u64 v = nf_resolve(r);
	__u32 arg = nf_verdict_arg(v);
	switch (nf_verdict_action(v)) {
	case NF_ACT_PASS:
	case NF_ACT_HOST:
		return TC_ACT_OK;
	case NF_ACT_TX:
		return bpf_redirect(ctx->ingress_ifindex ? ctx->ingress_ifindex : ctx->ifindex, 0);
	case NF_ACT_REDIRECT:
		return bpf_redirect(arg, 0);
	case NF_ACT_FLOOD: {
		__u32 in = ctx->ingress_ifindex ? ctx->ingress_ifindex : ctx->ifindex;
		for (__u32 i = 0; i < NF_FLOOD_PORTS; i++) {
			__u32 key = i; /* i itself stays in a register: a bounded loop */
			__u32 *port = bpf_map_lookup_elem(&nfkit_flood, &key);
			if (port && *port && *port != in)
				bpf_clone_redirect(ctx, *port, 0);
		}
		return TC_ACT_SHOT;
	}
	case NF_ACT_CONTROLLER:
		ctx->mark = NF_CONTROLLER_TAG | (arg & 0xffff);
		return TC_ACT_OK;
	default: /* ABORTED, DROP */
		return TC_ACT_SHOT;
	}
}
#else
static __always_inline int nf_action(NF_CTX *ctx, __u64 r)
{
	__u32 act = nf_verdict_action(nf_resolve(r));
	return (act == NF_ACT_ABORTED || act == NF_ACT_DROP) ? 0 : ctx->len;
}
#endif

/* Count a chain's result in nfkit_stats (abi.md 8), leave the slot, and
 * turn the result into the hook's return code. chain_id (__u32)-1 is the
 * "no chain claimed the packet" row. */
static __always_inline NF_RET nf_finish(NF_CTX *ctx, __u32 chain_id, __u64 r)
{
	__u32 k = nf_is_verdict(r) ? nf_verdict_action(r) : nf_is_value(r) ? NF_STAT_VALUE : NF_STAT_FAULT;
	__u32 idx = (chain_id + 1) * 16 + k;
	__u64 *s = bpf_map_lookup_elem(&nfkit_stats, &idx);
	if (s)
		*s += 1;
	nf_leave();
	return nf_action(ctx, r);
}

/* ------------------------------------------------------------------ */
/* Exports. NF_EXPORT(name) gives, for the hook being built, the
 * standalone program <hook>_<name> (xdp_, tc_, sock_) and the dynamic
 * entry dyn_<name>. The standalone program takes its arguments from
 * nf_args (.rodata, set by the loader before load). */

static const volatile __u64 nf_args[4] __attribute__((unused)) = {0, 0, 0, 0};

#define NF__EXPORT_STANDALONE(sec, prefix, name)                              \
	SEC(sec) NF_RET prefix##name(NF_CTX *ctx)                             \
	{                                                                     \
		if (!nf_enter(ctx))                                           \
			return nf_action(ctx, NF_FAULT);                      \
		__u64 r_ = nf_##name(ctx, nf_args[0], nf_args[1], nf_args[2], nf_args[3]); \
		nf_leave();                                                   \
		return nf_action(ctx, r_);                                    \
	}

/* Dynamic entry (abi.md 5): arguments from the frame; a verdict or fault
 * ends the chain at once; a value goes to frame->result and the
 * continuation frame->cont is tail-called (a failed tail call is a
 * fault). */
#define NF__EXPORT_DYN(sec, name)                                             \
	SEC(sec) NF_RET dyn_##name(NF_CTX *ctx)                               \
	{                                                                     \
		__u32 slot_ = nf__slot();                                     \
		struct nf_frame *f_ = bpf_map_lookup_elem(&nfkit_frame, &slot_); \
		if (!f_)                                                      \
			return nf_finish(ctx, (__u32)-1, NF_FAULT);           \
		__u64 r_ = nf_##name(ctx, f_->args[0], f_->args[1], f_->args[2], f_->args[3]); \
		if (r_ >> 63)                                                 \
			return nf_finish(ctx, f_->chain_id, r_);              \
		f_->result = r_;                                              \
		f_->calls += 1;                                               \
		bpf_tail_call(ctx, &nfkit_progs, f_->cont);                   \
		return nf_finish(ctx, f_->chain_id, NF_FAULT);                \
	}

#if NF_HOOK_ID == NF_HOOKID_XDP
#define NF_EXPORT_XDP(name) NF__EXPORT_STANDALONE("xdp", xdp_, name)
#define NF_EXPORT_DYN_XDP(name) NF__EXPORT_DYN("xdp", name)
#else
#define NF_EXPORT_XDP(name)
#define NF_EXPORT_DYN_XDP(name)
#endif
#if NF_HOOK_ID == NF_HOOKID_TC
#define NF_EXPORT_TC(name) NF__EXPORT_STANDALONE("tc", tc_, name)
#define NF_EXPORT_DYN_TC(name) NF__EXPORT_DYN("tc", name)
#else
#define NF_EXPORT_TC(name)
#define NF_EXPORT_DYN_TC(name)
#endif
#if NF_HOOK_ID == NF_HOOKID_SOCKET
#define NF_EXPORT_SOCKET(name) NF__EXPORT_STANDALONE("socket", sock_, name)
#define NF_EXPORT_DYN_SOCKET(name) NF__EXPORT_DYN("socket", name)
#else
#define NF_EXPORT_SOCKET(name)
#define NF_EXPORT_DYN_SOCKET(name)
#endif

/* Both exports of `name` for the hook being built. */
#define NF_EXPORT(name)                                                       \
	NF_EXPORT_XDP(name) NF_EXPORT_TC(name) NF_EXPORT_SOCKET(name)         \
	NF_EXPORT_DYN_XDP(name) NF_EXPORT_DYN_TC(name) NF_EXPORT_DYN_SOCKET(name) \
	_Static_assert(1, "")

#endif /* NFKIT_EXPORT_H */
