// An object whose non-packet programs use CO-RE on kernel structures
// (BPF_CORE_READ(task, pid) in a kprobe and a tracepoint program), next
// to an XDP program that must load and run on its own.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline void bump(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&hits, &k);
	if (p)
		*p += v;
}

SEC("kprobe/do_nanosleep")
int kp_sleep(struct pt_regs *ctx)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	bump(1, BPF_CORE_READ(task, pid));
	bump(2, BPF_CORE_READ(task, real_parent, tgid));
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_nanosleep")
int tp_sleep(void *ctx)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	bump(3, BPF_CORE_READ(task, tgid));
	return 0;
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	bump(0, end - data);
	return (end - data) > 100 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
