/* Large stack buffers, builtin memset/memcpy, a per-CPU scratch map. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct scratch {
	char buf[128];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} tmp SEC(".maps");

SEC("xdp")
int stack(struct xdp_md *ctx)
{
	char a[200];
	__builtin_memset(a, 0x11, sizeof(a));
	__u32 k = 0;
	struct scratch *s = bpf_map_lookup_elem(&tmp, &k);
	if (!s)
		return XDP_PASS;
	__builtin_memcpy(s->buf, a, sizeof(s->buf));
	return s->buf[7] == 0x11 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
