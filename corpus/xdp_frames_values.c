/* Pointers used right up to the edge of what they point to: callees at
 * three call depths read and write their callers' stack buffers through
 * pointers (a variable index included), and map values of an array, a
 * per-CPU array and a hash map are read and written to their last byte,
 * as is a ring-buffer record. The VM bounds every access by the frame or
 * value the pointer was made for (docs/vm.md, "Memory isolation"): none
 * of these may fault, and the VM must agree with the kernel. */
#include "common.h"

struct odd {
	__u8 b[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} by_len SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct odd);
} last_bytes SEC(".maps");

struct flow {
	__u32 pkts;
	__u32 sum;
	__u32 last;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, struct flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* Depth 3: reads the depth-1 buffer through a pointer, at a variable
 * index too, and writes its last byte. */
static __attribute__((noinline)) __u32 depth3(__u8 *outer, __u32 n)
{
	volatile __u8 local[16];
	__u32 sum = 0;

	for (int i = 0; i < 16; i++)
		local[i] = outer[i] ^ outer[31 - i] ^ (__u8)n;
	for (int i = 0; i < 16; i++)
		sum += local[i];
	sum += outer[n & 31];
	outer[31] = (__u8)sum;
	return sum;
}

/* Depth 2: a buffer of its own, then depth 3 on its caller's buffer. */
static __attribute__((noinline)) __u32 depth2(__u8 *outer, __u32 n)
{
	volatile __u8 mid[48];

	for (int i = 0; i < 48; i++)
		mid[i] = (__u8)(n + i);
	return depth3(outer, mid[n & 31]) + mid[47] + outer[0];
}

/* Depth 1: the first 32 bytes of the frame (zeros past its end). */
static __attribute__((noinline)) __u32 depth1(struct xdp_md *ctx, __u32 len)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 buf[32] = {};

	if (data + 32 <= end)
		__builtin_memcpy(buf, data, 32);
	__u32 s = depth2(buf, len);
	return s + buf[31];
}

SEC("xdp")
int xdp_frames_values(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	__u32 s = depth1(ctx, len);
	__u32 k = len & 3;

	__u32 *n = bpf_map_lookup_elem(&by_len, &k);
	if (n)
		*n += s & 0xff;

	__u32 zero = 0;
	struct odd *o = bpf_map_lookup_elem(&last_bytes, &zero);
	if (o) {
		o->b[0] += 1;
		o->b[5] = (__u8)s;
	}

	__u32 fk = len & 15;
	struct flow *f = bpf_map_lookup_elem(&flows, &fk);
	if (!f) {
		struct flow init = {};
		bpf_map_update_elem(&flows, &fk, &init, BPF_NOEXIST);
		f = bpf_map_lookup_elem(&flows, &fk);
	}
	if (f) {
		f->pkts += 1;
		f->sum += s;
		f->last = len;
	}

	__u8 *rec = bpf_ringbuf_reserve(&events, 13, 0);
	if (rec) {
		for (int i = 0; i < 13; i++)
			rec[i] = (__u8)(s + i);
		bpf_ringbuf_submit(rec, 0);
	}
	return (s & 1) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
