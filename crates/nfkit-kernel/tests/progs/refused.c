/* Programs the kernel's verifier refuses for a stack or map-value access
 * out of bounds, one per refusal class, for the reject-agreement test
 * (tests/reject_agreement.rs), plus some it accepts (an uninitialised
 * stack read, a checked index, bad accesses on paths a .rodata constant
 * rules out). Each program is its
 * own entry and is loaded on its own. `HIDE` keeps clang from seeing
 * where a pointer points (an empty asm that "changes" it), so it emits
 * the access as written; variable offsets come from the rx queue index,
 * which the verifier cannot know. */
#include "common.h"

#define HIDE(p) asm volatile("" : "+r"(p))

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} small SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} per_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u64);
	__type(value, __u64);
} wide_key SEC(".maps");

volatile __u32 counter;
const volatile __u32 debug_level = 0;

static __always_inline __u32 *lookup(void *map)
{
	__u32 key = 0;
	return bpf_map_lookup_elem(map, &key);
}

/* A constant offset 616 bytes below the frame pointer. */
SEC("xdp")
int stack_const_below(struct xdp_md *ctx)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	HIDE(p);
	return p[-600];
}

/* 4000 bytes below, plus 0 or 8. */
SEC("xdp")
int stack_var_below(struct xdp_md *ctx)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	__u32 i = ctx->rx_queue_index & 8;
	HIDE(p);
	return *(volatile __u64 *)(p - 4000 + i);
}

/* Above the frame pointer: the caller's side of the frame. */
SEC("xdp")
int stack_above_fp(struct xdp_md *ctx)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	HIDE(p);
	return *(volatile __u64 *)(p + 24);
}

/* Above the frame pointer by a variable 0..8 from its top. */
SEC("xdp")
int stack_var_above_fp(struct xdp_md *ctx)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	__u32 i = ctx->rx_queue_index & 8;
	HIDE(p);
	return *(volatile __u64 *)(p + 16 + i);
}

/* One byte below the frame on one of its two offsets only. */
SEC("xdp")
int stack_var_partly_below(struct xdp_md *ctx)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	__u32 i = ctx->rx_queue_index & 8;
	HIDE(p);
	return *(volatile char *)(p - 497 + i);
}

/* Value of 4 bytes, read at offset 8. */
SEC("xdp")
int value_const_past_end(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&small);
	if (!v)
		return XDP_PASS;
	HIDE(v);
	return *(volatile __u32 *)(v + 8);
}

/* 4 bytes before the value. */
SEC("xdp")
int value_const_before(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&small);
	if (!v)
		return XDP_PASS;
	HIDE(v);
	return *(volatile __u32 *)(v - 4);
}

/* Past the end by 8 plus 0 or 4. */
SEC("xdp")
int value_var_past_end(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&small);
	__u32 i = ctx->rx_queue_index & 4;
	if (!v)
		return XDP_PASS;
	HIDE(v);
	return *(volatile __u32 *)(v + 8 + i);
}

/* Before the start by 16 minus 0 or 4. */
SEC("xdp")
int value_var_before(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&small);
	__u32 i = ctx->rx_queue_index & 4;
	if (!v)
		return XDP_PASS;
	HIDE(v);
	return *(volatile __u32 *)(v - 16 + i);
}

/* Offset 0 or 4 of a 4-byte value: out of bounds on one of them. */
SEC("xdp")
int value_var_partly_past_end(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&small);
	__u32 i = ctx->rx_queue_index & 4;
	if (!v)
		return XDP_PASS;
	HIDE(v);
	return *(volatile __u32 *)(v + i);
}

/* One CPU's 4-byte slot, read at offset 8 (the next CPU's slot). */
SEC("xdp")
int percpu_value_past_end(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&per_cpu);
	if (!v)
		return XDP_PASS;
	HIDE(v);
	return *(volatile __u32 *)(v + 8);
}

/* Global data (.bss, one 4-byte variable) read 8 bytes further. */
SEC("xdp")
int global_past_end(struct xdp_md *ctx)
{
	char *g = (char *)&counter;
	HIDE(g);
	return *(volatile __u32 *)(g + 8);
}

/* A 4-byte ring-buffer record written with 8 bytes. */
SEC("xdp")
int ringbuf_record_past_end(struct xdp_md *ctx)
{
	char *r = bpf_ringbuf_reserve(&records, 4, 0);
	if (!r)
		return XDP_PASS;
	HIDE(r);
	*(volatile __u64 *)r = 1;
	bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

/* A map key 600 bytes below the frame, read by the helper. */
SEC("xdp")
int map_key_below_frame(struct xdp_md *ctx)
{
	volatile char buf[8] = {};
	char *p = (char *)buf;
	HIDE(p);
	return bpf_map_lookup_elem(&small, p - 600) ? XDP_DROP : XDP_PASS;
}

/* An 8-byte key read from a 4-byte map value. */
SEC("xdp")
int map_key_past_value(struct xdp_md *ctx)
{
	__u32 *v = lookup(&small);
	if (!v)
		return XDP_PASS;
	return bpf_map_lookup_elem(&wide_key, v) ? XDP_DROP : XDP_PASS;
}

/* A hash lookup's result used without its null check (the kernel knows
 * an array lookup of a constant key in range is never null). */
SEC("xdp")
int value_without_null_check(struct xdp_md *ctx)
{
	__u32 *v = lookup(&table);
	HIDE(v);
	return *(volatile __u32 *)v;
}

/* Reads a stack slot nothing wrote: privileged programs may. */
SEC("xdp")
int stack_uninit_read(struct xdp_md *ctx)
{
	char buf[16];
	char *p = buf;
	HIDE(p);
	return *(volatile __u32 *)(p + 4) ? XDP_DROP : XDP_PASS;
}

/* Out of the frame on a branch a read-only global rules out: the
 * kernel reads frozen .rodata as constants and never looks at it. */
SEC("xdp")
int rodata_dead_branch(struct xdp_md *ctx)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	HIDE(p);
	if (debug_level > 3)
		return p[-600];
	return XDP_PASS;
}

static __attribute__((noinline)) int read_far(__u32 x)
{
	volatile char buf[16] = {};
	char *p = (char *)buf;
	HIDE(p);
	return p[-600] + x;
}

/* The same through a subprogram only that branch calls: the kernel never
 * looks at the subprogram. */
SEC("xdp")
int rodata_dead_call(struct xdp_md *ctx)
{
	if (debug_level > 3)
		return read_far(ctx->rx_queue_index);
	return XDP_PASS;
}

/* An index checked against the value's size: in bounds. */
SEC("xdp")
int value_var_checked(struct xdp_md *ctx)
{
	char *v = (char *)lookup(&small);
	__u32 i = ctx->rx_queue_index;
	if (!v || i > 3)
		return XDP_PASS;
	HIDE(v);
	return *(volatile char *)(v + i);
}

char _license[] SEC("license") = "GPL";
