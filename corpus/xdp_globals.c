/* XDP using every kind of global data: .rodata config (const volatile,
 * set at load time), .data initialised counters, .bss, a string constant
 * (.rodata.str*), and a custom .data.stats section. A global
 * (separately verified) subprogram classifies the frame size. */
#include "common.h"

const volatile __u32 min_len = 60;
const volatile __u32 max_len = 1514;
const volatile __u8 drop_small = 1;

__u64 seen = 1;
__u64 bucket_base = 100;
__u64 too_small;
__u64 too_big;
__u64 sizes[4] SEC(".data.stats") = {1, 2, 3, 4};

__attribute__((noinline)) int size_bucket(__u32 len)
{
	if (len < min_len)
		return 0;
	if (len < 256)
		return 1;
	if (len <= max_len)
		return 2;
	return 3;
}

SEC("xdp")
int xdp_globals(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	__u32 b = size_bucket(len) & 3;
	seen += 1;
	sizes[b] += bucket_base;
	if (b == 0) {
		too_small++;
		if (drop_small) {
			bpf_printk("small frame %u", len);
			return XDP_DROP;
		}
	}
	if (b == 3) {
		too_big++;
		return XDP_DROP;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
