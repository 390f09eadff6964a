/* Checksum helper shared by the rewriting test programs. */
#ifndef NFKIT_OFFLOAD_TEST_CSUM_H
#define NFKIT_OFFLOAD_TEST_CSUM_H

/* Folds a 32-bit one's-complement sum to 16 bits and complements it. */
static __always_inline __u16 csum_fold(__u32 s)
{
	s = (s >> 16) + (s & 0xffff);
	s += s >> 16;
	return (__u16)~s;
}

#endif
