/* lddw of map values: .data, .rodata, .bss and a custom data section,
 * read and written at offsets. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

int counter = 5;
const int limit = 100;
long zeroed[4];
int custom SEC(".data.custom") = 9;
static char message[] = "hello";

SEC("xdp")
int values(struct xdp_md *ctx)
{
	zeroed[2]++;
	counter += custom;
	if (counter > limit)
		return XDP_DROP;
	return message[1] == 'e' ? XDP_PASS : XDP_ABORTED;
}

char LICENSE[] SEC("license") = "GPL";
