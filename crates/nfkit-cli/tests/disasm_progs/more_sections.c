/* uprobe, iter, raw_tp.w, tp_btf, syscall, freplace and cgroup sections. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("uprobe//bin/true:main")
int up(void *ctx) { return 0; }

SEC("iter/task")
int it(void *ctx) { return 0; }

SEC("raw_tp.w/sched_switch")
int rtw(void *ctx) { return 0; }

SEC("tp_btf/sched_wakeup")
int tpb(void *ctx) { return 1; }

SEC("syscall")
int sc(void *ctx) { return 2; }

SEC("freplace/handler")
int fr(void *ctx) { return 3; }

SEC("cgroup/connect4")
int c4(struct bpf_sock_addr *ctx) { return ctx->user_port != 0; }

SEC("cgroup/sock_create")
int cs(struct bpf_sock *sk) { return 1; }

char LICENSE[] SEC("license") = "GPL";
