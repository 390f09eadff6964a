/* The live-swap test's receiver: an XDP program that records the
 * sequence stamps of nfkit-traffic (crates/nfkit-traffic/src/seq.rs:
 * the UDP payload starts with "NFKQ", a big-endian u32 stream id and a
 * big-endian u64 sequence number) in a bitmap, one bit per sequence
 * number, and counts first arrivals, duplicates and strays. Frames of
 * the expected stream are dropped here (they have been counted); all
 * others go on to the stack.
 *
 * clang -O2 -g -target bpf -mcpu=v3 -c seq_counter.c -o seq_counter.o
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Sequence numbers 0 .. SEQ_WORDS * 64 - 1 are tracked. */
#define SEQ_WORDS 16384

/* seq_stats slots */
#define ST_FIRST 0    /* a sequence number seen for the first time */
#define ST_DUP 1      /* a sequence number seen again */
#define ST_RANGE 2    /* a sequence number beyond the bitmap */
#define ST_STREAM 3   /* stamped, but another stream */
#define ST_OTHER 4    /* not a stamped IPv4/UDP frame */
#define ST_SLOTS 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SEQ_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} seq_bits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} seq_stats SEC(".maps");

/* [0]: the stream id to record (set by the test before sending). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seq_conf SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&seq_stats, &slot);

	if (c)
		__sync_fetch_and_add(c, 1);
}

struct stamp {
	__u8 magic[4];
	__be32 stream;
	__be64 seq;
};

SEC("xdp")
int seq_counter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	struct stamp *st;
	__u32 zero = 0, word;
	__u64 *want, *w, bit, seq;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		goto other;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
		goto other;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		goto other;
	st = (void *)(udp + 1);
	if ((void *)(st + 1) > end || st->magic[0] != 'N' || st->magic[1] != 'F' ||
	    st->magic[2] != 'K' || st->magic[3] != 'Q')
		goto other;
	want = bpf_map_lookup_elem(&seq_conf, &zero);
	if (!want || *want != bpf_ntohl(st->stream)) {
		count(ST_STREAM);
		return XDP_PASS;
	}
	seq = bpf_be64_to_cpu(st->seq);
	if (seq >= (__u64)SEQ_WORDS * 64) {
		count(ST_RANGE);
		return XDP_DROP;
	}
	word = seq / 64;
	bit = 1ULL << (seq % 64);
	w = bpf_map_lookup_elem(&seq_bits, &word);
	if (!w)
		return XDP_DROP;
	count(__sync_fetch_and_or(w, bit) & bit ? ST_DUP : ST_FIRST);
	return XDP_DROP;
other:
	count(ST_OTHER);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
