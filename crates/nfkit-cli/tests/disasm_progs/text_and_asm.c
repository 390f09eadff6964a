/* Programs with inline assembly: a local call to a label no symbol
 * names, and a may-be-unusual instruction mix. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int asm_prog(struct xdp_md *ctx)
{
	int r;
	asm volatile(
		"r1 = 5\n"
		"call 2f\n"
		"%[r] = r0\n"
		"goto 3f\n"
		"2:\n"
		"r0 = r1\n"
		"r0 <<= 1\n"
		"exit\n"
		"3:\n"
		: [r] "=r"(r)
		:
		: "r0", "r1", "r2", "r3", "r4", "r5");
	return r == 10 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
