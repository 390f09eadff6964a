/* fentry/fexit, lsm, kprobe and tracepoint programs (with CO-RE reads
 * through preserve_access_index types). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

struct file {
	unsigned int f_flags;
} __attribute__((preserve_access_index));

long hits;

SEC("fexit/do_unlinkat")
int BPF_PROG(on_unlink_exit, int dfd, void *name, long ret)
{
	__sync_fetch_and_add(&hits, 1);
	return 0;
}

SEC("fentry/do_unlinkat")
int BPF_PROG(on_unlink, int dfd)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	hits += BPF_CORE_READ(t, tgid);
	return 0;
}

SEC("lsm/file_open")
int BPF_PROG(on_open, struct file *f)
{
	return BPF_CORE_READ(f, f_flags) & 1 ? 0 : 0;
}

SEC("kprobe/do_sys_openat2")
int on_kprobe(void *ctx)
{
	hits++;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int on_tp(void *ctx)
{
	bpf_printk("openat %ld", hits);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
