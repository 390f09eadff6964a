// Two XDP programs of one object: `xdp_nope` reads a field that the
// kernel's `struct iphdr` does not have (through a local flavour of it),
// so its CO-RE relocation cannot be resolved; `xdp_fine` does not use it
// and must still run (reading `ttl` through another local flavour).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct iphdr___nope {
	int missing_field;
} __attribute__((preserve_access_index));

SEC("xdp")
int xdp_nope(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct iphdr___nope *ip = data + 14;
	if ((void *)(ip + 1) > end)
		return XDP_PASS;
	return ip->missing_field == 7 ? XDP_DROP : XDP_PASS;
}

/* A flavour of the kernel's struct iphdr that only names `ttl`: its
 * offset (8) comes from the kernel's BTF. */
struct iphdr___mine {
	__u8 ttl;
} __attribute__((preserve_access_index));

SEC("xdp")
int xdp_fine(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct iphdr___mine *ip = data + 14;
	if (data + 34 > end)
		return XDP_PASS;
	return ip->ttl == 0x45 ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
