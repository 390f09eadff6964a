/* struct_ops programs and a struct_ops map (a tcp_congestion_ops-like
 * shape declared here). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct sock;

struct tcp_congestion_ops {
	void (*init)(struct sock *sk);
	unsigned int (*ssthresh)(struct sock *sk);
	char name[16];
} __attribute__((preserve_access_index));

SEC("struct_ops/demo_init")
void BPF_PROG(demo_init, struct sock *sk)
{
}

SEC("struct_ops/demo_ssthresh")
unsigned int BPF_PROG(demo_ssthresh, struct sock *sk)
{
	return 2;
}

SEC(".struct_ops")
struct tcp_congestion_ops demo = {
	.init = (void *)demo_init,
	.ssthresh = (void *)demo_ssthresh,
	.name = "nfkit_demo",
};

char LICENSE[] SEC("license") = "GPL";
