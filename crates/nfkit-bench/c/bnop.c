/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module bnop
 * @hooks xdp
 * Benchmark NFs: the cheapest NF there is, to measure what a call costs.
 */
#include "nfkit.h"

/**
 * @nf nop(x)
 * Does nothing but give back its argument.
 * @arg x any value
 * @returns x as a plain value (its low 63 bits).
 * @maps none
 * @bad none: every argument is fine.
 */
NF(nop, x)
{
	return NF_VALUE(x);
}
NF_EXPORT(nop);
