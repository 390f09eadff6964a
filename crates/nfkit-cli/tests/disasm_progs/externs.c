/* Externs: a kconfig value, a ksym variable and a kfunc. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern unsigned int LINUX_KERNEL_VERSION __kconfig;
extern const int bpf_prog_active __ksym;
extern struct task_struct *bpf_task_acquire(struct task_struct *p) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

SEC("tp_btf/sched_switch")
int externs(void *ctx)
{
	struct task_struct *t = (void *)bpf_get_current_task_btf();
	struct task_struct *a = bpf_task_acquire(t);
	if (a)
		bpf_task_release(a);
	return LINUX_KERNEL_VERSION > 0 && &bpf_prog_active != 0;
}

char LICENSE[] SEC("license") = "GPL";
