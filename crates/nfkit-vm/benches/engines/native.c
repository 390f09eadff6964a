/* The engines bench's programs as native C: the same work as the eBPF
 * programs in benches/common/mod.rs, compiled by the bench with
 * clang -O2 (vectorizers off: eBPF has no vector instructions) into a
 * shared object the bench loads and calls through function pointers. */

#include <stdint.h>
#include <string.h>

static uint16_t load16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* PARSER: 1 (drop) for TCP/UDP to ports 22, 23, 445, 3389, else 2. */
uint64_t nat_parse(const uint8_t *data, const uint8_t *end)
{
	if (data + 14 > end || load16(data + 12) != 8)
		return 2;
	if (data + 34 > end)
		return 2;
	uint8_t proto = data[23];
	if (proto != 17 && proto != 6)
		return 2;
	const uint8_t *l4 = data + 14 + ((data[14] & 15) << 2);
	if (l4 + 4 > end)
		return 2;
	uint16_t port = (uint16_t)((l4[2] << 8) | l4[3]);
	if (port == 22 || port == 23 || port == 445 || port == 3389)
		return 1;
	return 2;
}

/* ALU_LOOP: 1000 rounds of xorshift mixing from `seed`. */
uint64_t nat_alu(uint64_t seed)
{
	uint64_t r0 = seed;
	for (uint64_t r1 = 1000; r1 != 0; r1--) {
		r0 ^= r0 << 13;
		r0 ^= r0 >> 7;
		r0 ^= r0 << 17;
		r0 += r1;
	}
	return r0;
}

/* PKT_SUM: 16-bit one's-complement sum of the packet, folded once. */
uint64_t nat_pkt_sum(const uint8_t *p, const uint8_t *end)
{
	uint64_t s = 0;
	while (p + 8 <= end) {
		s += load16(p) + load16(p + 2) + load16(p + 4) + load16(p + 6);
		p += 8;
	}
	while (p + 2 <= end) {
		s += load16(p);
		p += 2;
	}
	return (s & 0xffff) + (s >> 16);
}

/* The trivial helper of the helper-call programs (it gives back its
 * argument, as cheaply as nfkit's bpf_get_smp_processor_id on CPU 0 gives
 * 0), kept out of line like a helper. */
__attribute__((noinline)) uint64_t nat_helper(uint64_t a)
{
	__asm__ volatile("" ::: "memory");
	return a;
}

/* helper_calls(n): n calls of the trivial helper. */
uint64_t nat_helper_calls(uint64_t n)
{
	uint64_t r0 = 0;
	for (uint64_t i = 0; i < n; i++)
		r0 = nat_helper(r0);
	return r0;
}
