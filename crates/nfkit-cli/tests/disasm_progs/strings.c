/* bpf_printk strings (.rodata.str1.1), a const table and a static
 * global in .bss. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static const char table[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static int seen;

SEC("tracepoint/net/netif_receive_skb")
int strs(void *ctx)
{
	seen++;
	bpf_printk("seen %d", seen);
	bpf_printk("table %d", table[seen & 7]);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
