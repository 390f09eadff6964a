/* The VM's network helpers, compared with the kernel in
 * tests/vm_net_helpers.rs: bpf_fib_lookup (XDP and TC), bpf_skb_adjust_room,
 * bpf_skb_change_proto, bpf_skb_ecn_set_ce, bpf_skb_{set,get}_tunnel_key,
 * bpf_perf_event_output (XDP, TC, socket filter), bpf_clone_redirect.
 *
 * TC programs take their arguments from skb->cb (set through the test
 * run's context); fib programs from the packet (IPv4 id / IPv6 flow label
 * low byte = lookup flags, bit 8 = pass the IP length as tot_len). Results
 * go to the `out` maps, compared after each run. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __s64);
} room_out SEC(".maps");

struct fib_res {
	__s64 rc;
	struct bpf_fib_lookup params;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fib_res);
} fib_out SEC(".maps");

struct tun_res {
	__s64 set_rc;
	__s64 get_rc;
	__u8 key[48];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tun_res);
} tun_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __s64);
} perf_out SEC(".maps");

static __always_inline void put(void *map, __u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(map, &k);
	if (p)
		*p = v;
}

static __always_inline __s64 vlan_word(struct __sk_buff *skb)
{
	return ((__s64)skb->vlan_present << 40) | ((__s64)skb->vlan_proto << 16) |
	       skb->vlan_tci;
}

/* cb[0] = op; adjust_room: cb[1] = len_diff, cb[2] = mode,
 * cb[3] / cb[4] = flags low / high; change_proto: cb[1] = EtherType,
 * cb[3] = flags; set_hash, change_type, csum_update: cb[1] = the value;
 * change_tail: cb[1] = new length, cb[3] = flags. */
SEC("tc")
int tc_room(struct __sk_buff *skb)
{
	__u64 flags = ((__u64)skb->cb[4] << 32) | skb->cb[3];
	long rc;

	switch (skb->cb[0]) {
	case 0:
		rc = bpf_skb_adjust_room(skb, (__s32)skb->cb[1], skb->cb[2], flags);
		break;
	case 1:
		rc = bpf_skb_change_proto(skb, bpf_htons(skb->cb[1]), flags);
		break;
	case 2:
		rc = bpf_skb_ecn_set_ce(skb);
		break;
	case 3:
		/* Encapsulating twice: the second is refused (EALREADY). */
		rc = bpf_skb_adjust_room(skb, (__s32)skb->cb[1], skb->cb[2], flags);
		put(&room_out, 3, rc);
		rc = bpf_skb_adjust_room(skb, (__s32)skb->cb[1], skb->cb[2], flags);
		break;
	case 4:
		rc = bpf_set_hash(skb, skb->cb[1]);
		put(&room_out, 3, skb->hash);
		break;
	case 5:
		bpf_set_hash(skb, skb->cb[1]);
		bpf_set_hash_invalid(skb);
		rc = 0;
		put(&room_out, 3, skb->hash);
		break;
	case 6:
		rc = bpf_skb_change_type(skb, skb->cb[1]);
		put(&room_out, 3, skb->pkt_type);
		break;
	case 7:
		rc = bpf_csum_update(skb, skb->cb[1]);
		break;
	case 8:
		rc = bpf_skb_change_tail(skb, skb->cb[1], flags);
		break;
	case 10:
		rc = bpf_skb_vlan_push(skb, bpf_htons(skb->cb[1]), skb->cb[2]);
		put(&room_out, 3, vlan_word(skb));
		break;
	case 11:
		bpf_skb_vlan_push(skb, bpf_htons(skb->cb[1]), skb->cb[2]);
		rc = bpf_skb_vlan_push(skb, bpf_htons(skb->cb[3]), skb->cb[4]);
		put(&room_out, 3, vlan_word(skb));
		break;
	case 12:
		rc = bpf_skb_vlan_pop(skb);
		put(&room_out, 3, vlan_word(skb));
		break;
	case 13:
		bpf_skb_vlan_push(skb, bpf_htons(skb->cb[1]), skb->cb[2]);
		rc = bpf_skb_vlan_pop(skb);
		put(&room_out, 3, vlan_word(skb));
		break;
	case 14:
		bpf_skb_vlan_pop(skb);
		rc = bpf_skb_vlan_pop(skb);
		put(&room_out, 3, vlan_word(skb));
		break;
	case 15: {
		/* csum_level steps cb[1..3] (5, 6: adjust_room without and
		 * with NO_CSUM_RESET), then a query; each result's low byte. */
		__s64 acc = 0;
		for (int i = 1; i <= 3; i++) {
			__u32 v = i == 1 ? skb->cb[1] : i == 2 ? skb->cb[2] : skb->cb[3];
			long r;
			if (v == 5)
				r = bpf_skb_adjust_room(skb, 8, BPF_ADJ_ROOM_NET, 0);
			else if (v == 6)
				r = bpf_skb_adjust_room(skb, 8, BPF_ADJ_ROOM_NET,
							BPF_F_ADJ_ROOM_NO_CSUM_RESET);
			else
				r = bpf_csum_level(skb, v);
			acc = (acc << 8) | (r & 0xff);
		}
		put(&room_out, 3, acc);
		rc = bpf_csum_level(skb, BPF_CSUM_LEVEL_QUERY);
		break;
	}
	case 16: {
		/* change_head (cb[1] bytes, flags cb[3]), then cb[2]: 1
		 * adjust_room NET 8, 2 ecn, 3 change_proto to IPv6, 4
		 * change_tail to cb[4], 5 4 bytes from the network header. */
		__u32 w = 0;
		rc = bpf_skb_change_head(skb, skb->cb[1], skb->cb[3]);
		switch (skb->cb[2]) {
		case 1:
			w = bpf_skb_adjust_room(skb, 8, BPF_ADJ_ROOM_NET, 0);
			break;
		case 2:
			w = bpf_skb_ecn_set_ce(skb);
			break;
		case 3:
			w = bpf_skb_change_proto(skb, bpf_htons(ETH_P_IPV6), 0);
			break;
		case 4:
			w = bpf_skb_change_tail(skb, skb->cb[4], 0);
			break;
		case 5:
			bpf_skb_load_bytes_relative(skb, 0, &w, 4, BPF_HDR_START_NET);
			break;
		}
		put(&room_out, 3, w);
		break;
	}
	case 17:
		rc = bpf_skb_set_tstamp(skb, ((__u64)skb->cb[1] << 32) | skb->cb[3], skb->cb[2]);
		put(&room_out, 3, skb->tstamp);
		break;
	default:
		/* After an encapsulation the tail cannot change (ENOTSUPP). */
		put(&room_out, 3, bpf_skb_adjust_room(skb, 20, BPF_ADJ_ROOM_MAC,
						     BPF_F_ADJ_ROOM_ENCAP_L3_IPV4));
		rc = bpf_skb_change_tail(skb, skb->cb[1], flags);
		break;
	}
	put(&room_out, 0, rc);
	put(&room_out, 1, skb->protocol);
	put(&room_out, 2, skb->len);
	return TC_ACT_OK;
}

/* cb[0]: 0 = get only; else set (cb[1] = id, cb[2] = set flags, cb[4] =
 * set size, tunnel_label = cb[0] >> 8) then get (cb[3] = get flags, size
 * = cb[4] when cb[0] & 0x80 else the whole key). */
SEC("tc")
int tc_tunnel(struct __sk_buff *skb)
{
	struct bpf_tunnel_key key = {};
	struct tun_res *r;
	__u32 zero = 0, op = skb->cb[0], size = skb->cb[4];
	long rc = 0;

	r = bpf_map_lookup_elem(&tun_out, &zero);
	if (!r)
		return TC_ACT_SHOT;
	if (op & 0xff) {
		key.tunnel_id = skb->cb[1];
		key.tunnel_tos = 0x10;
		key.tunnel_ttl = 9;
		key.tunnel_label = op >> 8;
		if (skb->cb[2] & BPF_F_TUNINFO_IPV6) {
			key.remote_ipv6[0] = bpf_htonl(0x20010db8);
			key.remote_ipv6[3] = bpf_htonl(2);
			key.local_ipv6[0] = bpf_htonl(0x20010db8);
			key.local_ipv6[3] = bpf_htonl(1);
		} else {
			key.remote_ipv4 = 0xc6120002;
			key.local_ipv4 = 0xc6120001;
		}
		if (size > sizeof(key) || size == 0)
			size = sizeof(key);
		rc = bpf_skb_set_tunnel_key(skb, &key, size, skb->cb[2]);
	}
	r->set_rc = rc;
	__builtin_memset(&key, 0x5a, sizeof(key));
	size = (op & 0x80) ? skb->cb[4] : sizeof(key);
	if (size > sizeof(key) || size == 0)
		size = sizeof(key);
	r->get_rc = bpf_skb_get_tunnel_key(skb, &key, size, skb->cb[3]);
	__builtin_memcpy(r->key, &key, sizeof(key));
	return TC_ACT_OK;
}

/* Tunnel options: cb[0] = 1 sets a key first; cb[1] = option bytes to
 * set (0xff: none), cb[2] = buffer size to get them into; the key's
 * flags afterwards. */
SEC("tc")
int tc_tunopt(struct __sk_buff *skb)
{
	struct bpf_tunnel_key key = { .tunnel_id = 3, .remote_ipv4 = 0xc6120002 };
	__u8 opt[20] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 };
	__u32 zero = 0, n = skb->cb[1], m = skb->cb[2];
	struct tun_res *r = bpf_map_lookup_elem(&tun_out, &zero);

	if (!r)
		return TC_ACT_SHOT;
	if (skb->cb[0])
		bpf_skb_set_tunnel_key(skb, &key, sizeof(key), 0);
	r->set_rc = 1;
	if (n != 0xff) {
		if (n > sizeof(opt) || n == 0)
			n = sizeof(opt);
		r->set_rc = bpf_skb_set_tunnel_opt(skb, opt, n);
	}
	__builtin_memset(opt, 0x5a, sizeof(opt));
	if (m > sizeof(opt) || m == 0)
		m = sizeof(opt);
	r->get_rc = bpf_skb_get_tunnel_opt(skb, opt, m);
	__builtin_memcpy(r->key, opt, sizeof(opt));
	__builtin_memset(&key, 0, sizeof(key));
	r->key[40] = bpf_skb_get_tunnel_key(skb, &key, sizeof(key), BPF_F_TUNINFO_FLAGS);
	__builtin_memcpy(&r->key[42], &key.tunnel_flags, 2);
	return TC_ACT_OK;
}

static __always_inline long fib(void *ctx, void *data, void *end, __u32 ifindex)
{
	struct bpf_fib_lookup p = {};
	struct ethhdr *eth = data;
	__u32 zero = 0, flags = 0;
	struct fib_res *r;
	long rc;

	if (!IN_PKT(eth, sizeof(*eth), end))
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if (!IN_PKT(ip, sizeof(*ip), end))
			return -1;
		p.family = 2;
		p.tos = ip->tos;
		p.l4_protocol = ip->protocol;
		p.ipv4_src = ip->saddr;
		p.ipv4_dst = ip->daddr;
		flags = bpf_ntohs(ip->id);
		if (flags & 0x100)
			p.tot_len = bpf_ntohs(ip->tot_len);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if (!IN_PKT(ip6, sizeof(*ip6), end))
			return -1;
		p.family = 10;
		p.l4_protocol = ip6->nexthdr;
		__builtin_memcpy(p.ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(p.ipv6_dst, &ip6->daddr, 16);
		flags = (ip6->flow_lbl[1] << 8) | ip6->flow_lbl[2];
		if (flags & 0x100)
			p.tot_len = bpf_ntohs(ip6->payload_len) + 40;
	} else {
		/* An unknown family: EAFNOSUPPORT. */
		p.family = 7;
	}
	p.ifindex = ifindex;
	if (flags & 8) /* TBID */
		p.tbid = 100;
	rc = bpf_fib_lookup(ctx, &p, sizeof(p), flags & 0xff);
	r = bpf_map_lookup_elem(&fib_out, &zero);
	if (r) {
		r->rc = rc;
		r->params = p;
	}
	return rc;
}

SEC("xdp")
int xdp_fib(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	fib(ctx, data, end, ctx->ingress_ifindex);
	return XDP_PASS;
}

SEC("tc")
int tc_fib(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;

	fib(skb, data, end, skb->cb[0]);
	return TC_ACT_OK;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __s64);
} mtu_out SEC(".maps");

/* bpf_check_mtu with its arguments from the UDP payload of an IPv4 frame
 * (bytes 42..58, little-endian: ifindex, mtu_len, len_diff, flags). */
static __always_inline void mtu(void *ctx, void *data, void *end)
{
	__u32 *a = data + 42;
	__u32 mtu_len;
	long rc;

	if ((void *)(a + 4) > end)
		return;
	mtu_len = a[1];
	rc = bpf_check_mtu(ctx, a[0], &mtu_len, (__s32)a[2], a[3]);
	put(&mtu_out, 0, rc);
	put(&mtu_out, 1, mtu_len);
}

SEC("xdp")
int xdp_mtu(struct xdp_md *ctx)
{
	mtu(ctx, (void *)(long)ctx->data, (void *)(long)ctx->data_end);
	return XDP_PASS;
}

SEC("tc")
int tc_mtu(struct __sk_buff *skb)
{
	mtu(skb, (void *)(long)skb->data, (void *)(long)skb->data_end);
	return TC_ACT_OK;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __s64);
} str_out SEC(".maps");

static const char target[] = "198.18.0";

/* String helpers on the UDP payload: byte 40 = strtoX flags, byte 41 =
 * length (1..32), the text from byte 42. */
SEC("xdp")
int xdp_str(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	char buf[32] = {};
	long l = 7;
	unsigned long u = 7;
	__u32 n;

	if (data + 42 > end)
		return XDP_DROP;
	n = data[41];
	if (n == 0 || n > 32)
		n = 32;
	if (bpf_xdp_load_bytes(ctx, 42, buf, 32))
		return XDP_DROP;
	put(&str_out, 0, bpf_strtol(buf, n, data[40], &l));
	put(&str_out, 1, l);
	put(&str_out, 2, bpf_strtoul(buf, n, data[40], &u));
	put(&str_out, 3, u);
	put(&str_out, 4, bpf_strncmp(buf, n, target));
	return XDP_PASS;
}

struct sample {
	__u32 magic;
	__u32 len;
	__u64 seq;
};

/* Packet byte 15 selects the flags: bit 0 = another CPU's index, bit 1 =
 * an index past the map, bit 2 = append 20 packet bytes, bit 3 = append
 * more bytes than the packet has, bit 4 = an unknown flag bit. */
static __always_inline long emit(void *ctx, __u32 len, __u8 sel)
{
	struct sample s = { .magic = 0x6e666b74, .len = len, .seq = sel };
	__u64 flags = BPF_F_CURRENT_CPU;
	long rc;

	if (sel & 1)
		flags = bpf_get_smp_processor_id() ^ 1;
	if (sel & 2)
		flags = 4096;
	if (sel & 4)
		flags |= (__u64)20 << 32;
	if (sel & 8)
		flags |= (__u64)(len + 1) << 32;
	if (sel & 16)
		flags |= 1ULL << 60;
	rc = bpf_perf_event_output(ctx, &events, flags, &s, sizeof(s));
	put(&perf_out, 0, rc);
	return rc;
}

SEC("xdp")
int xdp_perf(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *sel = data + 15;

	if (!IN_PKT(sel, 1, end))
		return XDP_DROP;
	emit(ctx, end - data, *sel);
	return XDP_PASS;
}

SEC("tc")
int tc_perf(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 *sel = data + 15;

	if (!IN_PKT(sel, 1, end))
		return TC_ACT_SHOT;
	emit(skb, skb->len, *sel);
	return TC_ACT_OK;
}

SEC("socket")
int socket_perf(struct __sk_buff *skb)
{
	__u8 sel = 0;

	bpf_skb_load_bytes(skb, 1, &sel, 1);
	emit(skb, skb->len, sel);
	return 0;
}

/* bpf_clone_redirect(skb, cb[0], cb[1]); its result in clone_out[0], then
 * the packet goes on (TC_ACT_OK). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} clone_out SEC(".maps");

SEC("tc")
int tc_clone(struct __sk_buff *skb)
{
	__u32 k = 0;
	__s64 rc = bpf_clone_redirect(skb, skb->cb[0], skb->cb[1]);

	bpf_map_update_elem(&clone_out, &k, &rc, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
