/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @module base
 * @hooks xdp tc socket
 * The verdicts as NFs: end the packet's processing with a fixed action.
 * On socket filters every verdict but DROP and ABORTED keeps the packet.
 */
#include "nfkit.h"

/* The ABI's enums and 64-bit constants in this object's BTF (nfkit-abi checks them). */
NF_ABI_ANCHOR;

/**
 * @nf drop()
 * Drop the packet.
 * @returns the verdict DROP.
 * @maps none
 * @bad no arguments.
 */
NF(drop)
{
	return NF_DROP;
}
NF_EXPORT(drop);

/**
 * @nf allow()
 * Pass the packet to the host stack.
 * @returns the verdict PASS.
 * @maps none
 * @bad no arguments.
 */
NF(allow)
{
	return NF_PASS;
}
NF_EXPORT(allow);

/**
 * @nf abort()
 * Drop the packet as an error (XDP_ABORTED: visible in the xdp_exception
 * tracepoint).
 * @returns the verdict ABORTED.
 * @maps none
 * @bad no arguments.
 */
NF(abort)
{
	return NF_ABORTED;
}
NF_EXPORT(abort);

/**
 * @nf tx()
 * Send the packet back out of the interface it came in on.
 * @returns the verdict TX.
 * @maps none
 * @bad no arguments.
 */
NF(tx)
{
	return NF_TX;
}
NF_EXPORT(tx);

/**
 * @nf redirect(ifindex)
 * Send the packet out of another interface (a port in the software switch).
 * @arg ifindex target interface index, or port number in the software switch
 * @returns the verdict REDIRECT(ifindex).
 * @maps none
 * @bad ifindex >= 2^32 cannot name an interface: the verdict DROP. ifindex 0
 *      is passed through (the kernel drops it, the software switch's port 0).
 */
NF(redirect, ifindex)
{
	if (ifindex >> 32)
		return NF_DROP;
	return NF_REDIRECT(ifindex);
}
NF_EXPORT(redirect);
