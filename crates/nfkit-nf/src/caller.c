/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The caller: a minimal "chain" that runs one NF on a packet and reports
 * its full 64-bit result, for tests (VM and BPF_PROG_TEST_RUN) and tools.
 * Built once per hook like the NFs. nf_target is left undefined: the
 * library links this object with an NF module whose nf_<name> is renamed
 * nf_target (src/caller.rs).
 *
 *   nfkit_call      parses the packet (nf_enter), calls
 *                   nf_target(ctx, args[0..4]) with the arguments of
 *                   nfkit_call_args (this CPU's slot), stores the result
 *                   there, and returns it as r0 (all 64 bits in the VM;
 *                   the kernel's test run keeps the low 32, so read the map).
 *   nfkit_call_act  the same, but returns the hook's return code for the
 *                   result (nf_finish, chain id 0), as a classifier would.
 */
#include "nfkit.h"

struct nf_call_args {
	__u64 args[4];
	__u64 result;
	__u64 calls; /* runs on this CPU */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nf_call_args);
} nfkit_call_args SEC(".maps");

#ifdef NF_CALLER_TARGET
/* Built together with the module (clang -include nf/<module>.c
 * -DNF_CALLER_TARGET=nf_<name> caller.c): one object the kernel loads as
 * it is, for BPF_PROG_TEST_RUN comparisons. */
#define nf_target NF_CALLER_TARGET
#else
extern __u64 nf_target(NF_CTX *ctx, __u64 a1, __u64 a2, __u64 a3, __u64 a4);
#endif

#if NF_HOOK_ID == NF_HOOKID_XDP
#define NF_CALL_SEC "xdp"
#elif NF_HOOK_ID == NF_HOOKID_TC
#define NF_CALL_SEC "tc"
#else
#define NF_CALL_SEC "socket"
#endif

static __always_inline __u64 nf__call(NF_CTX *ctx)
{
	__u32 k = 0;
	struct nf_call_args *a = bpf_map_lookup_elem(&nfkit_call_args, &k);
	__u64 r;

	if (!a)
		return NF_FAULT;
	if (!nf_enter(ctx))
		return NF_FAULT;
	r = nf_target(ctx, a->args[0], a->args[1], a->args[2], a->args[3]);
	a->result = r;
	a->calls += 1;
	return r;
}

SEC(NF_CALL_SEC) __u64 nfkit_call(NF_CTX *ctx)
{
	__u64 r = nf__call(ctx);
	nf_leave();
	return r;
}

SEC(NF_CALL_SEC) int nfkit_call_act(NF_CTX *ctx)
{
	return nf_finish(ctx, 0, nf__call(ctx));
}
