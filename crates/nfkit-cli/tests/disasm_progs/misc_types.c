/* Other program types: raw_tp, sockops, sk_msg, sk_skb, cgroup_skb,
 * socket, perf_event, and a ring buffer and perf event array. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(int));
	__uint(value_size, sizeof(int));
} events SEC(".maps");

SEC("raw_tp/sys_enter")
int raw(void *ctx)
{
	long *p = bpf_ringbuf_reserve(&rb, 8, 0);
	if (p) {
		*p = 1;
		bpf_ringbuf_submit(p, 0);
	}
	return 0;
}

SEC("sockops")
int ops(struct bpf_sock_ops *o)
{
	return o->op == 4;
}

SEC("sk_msg")
int msg(struct sk_msg_md *m)
{
	return SK_PASS;
}

SEC("sk_skb/stream_verdict")
int verdict(struct __sk_buff *skb)
{
	return skb->len ? SK_PASS : SK_DROP;
}

SEC("cgroup_skb/ingress")
int cg(struct __sk_buff *skb)
{
	long v = skb->len;
	bpf_perf_event_output(skb, &events, BPF_F_CURRENT_CPU, &v, sizeof(v));
	return 1;
}

SEC("socket")
int sock(struct __sk_buff *skb)
{
	return skb->len;
}

SEC("perf_event")
int perf(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
