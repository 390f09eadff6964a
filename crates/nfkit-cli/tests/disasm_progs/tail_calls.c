/* A prog array initialised with __array(values) and tail calls. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

int tc_a(struct __sk_buff *skb);

SEC("tc")
int tc_b(struct __sk_buff *skb)
{
	return 1;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, int(void *));
} jumps SEC(".maps") = {
	.values = { [1] = (void *)&tc_b },
};

SEC("tc")
int tc_a(struct __sk_buff *skb)
{
	bpf_tail_call(skb, &jumps, skb->mark & 3);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
