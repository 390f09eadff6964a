/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nfkit.h - the header NF authors include. It is the C source of truth of
 * the binary contract described in docs/abi.md, in three parts:
 *
 *   nfkit/abi.h     layouts and constants: results, the packet info block,
 *                   configuration, the dynamic frame, sizes, shared maps
 *   nfkit/parse.h   the current packet: info block, time, randomness,
 *                   header access, the parser, entry and exit
 *   nfkit/export.h  NF declarations, results into hook codes, exports
 *
 * Build every NF source once per hook:
 *
 *   clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_XDP    -I nf/include -c f.c -o f.xdp.o
 *   clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_TC     -I nf/include -c f.c -o f.tc.o
 *   clang -O2 -g -target bpf -mcpu=v3 -DNF_HOOK_SOCKET -I nf/include -c f.c -o f.socket.o
 *
 * Writing an NF:
 *
 *   #include "nfkit.h"
 *
 *   NF(ttl_below, limit)                 // __u64 nf_ttl_below(ctx, limit, _a2, _a3, _a4)
 *   {
 *       struct nf_pkt_info *pi = nf_info(ctx);
 *       if (!pi)
 *           return NF_FAULT;
 *       return pi->ttl < limit;          // a value (0 or 1)
 *   }
 *   NF_EXPORT(ttl_below);                // xdp_ttl_below / tc_... / sock_... and dyn_ttl_below
 *
 * Turning an existing XDP program into an NF takes three lines: rename the
 * entry into an NF, return verdicts instead of XDP codes, export it.
 *
 *   SEC("xdp")                           NF(my_filter)
 *   int my_filter(struct xdp_md *ctx)    {
 *   {                                        ... unchanged body using ctx ...
 *       ... return XDP_DROP;                 return NF_DROP;
 *       ... return XDP_PASS;                 return NF_PASS;   (or a value for the chain)
 *   }                                    }
 *                                        NF_EXPORT(my_filter);
 *
 * The exported xdp_my_filter behaves like the original program; the chain
 * language imports it as `from nf.<file> import my_filter`.
 */
#ifndef NFKIT_H
#define NFKIT_H

#include "nfkit/abi.h"
#include "nfkit/parse.h"
#include "nfkit/export.h"

#endif /* NFKIT_H */
