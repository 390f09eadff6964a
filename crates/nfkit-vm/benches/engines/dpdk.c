/* The engines bench's shim to DPDK's rte_bpf (libdpdk-dev): loads a
 * program, runs it on the interpreter or the JIT. Compiled by the bench at
 * run time into a shared object linked with librte_bpf.
 *
 * rte_bpf's validator follows pointers by value ranges, not by data_end
 * comparisons: a packet pointer must come from an rte_mbuf's buf_addr. So
 * packet programs get a (stack) mbuf whose buffer starts HEADROOM bytes
 * before the packet (data_off = HEADROOM, the value the validator assumes),
 * and their prologue computes data and data_end from it; the packet is
 * not copied. The validator refuses loops. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rte_bpf.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#define HEADROOM RTE_PKTMBUF_HEADROOM
/* What the validator lets a program reach past buf_addr. */
#define BUF_SIZE (HEADROOM + 4096)
/* Helper ids 0..NB_XSYM-1 all name the trivial helper. */
#define NB_XSYM 16

struct shim {
	struct rte_bpf *bpf;
	uint64_t (*jit)(void *);
};

static uint64_t trivial_helper(uint64_t a)
{
	return a;
}

/* Offsets of buf_addr, data_off and data_len in struct rte_mbuf. */
void dpdk_mbuf_offsets(uint32_t out[3])
{
	out[0] = offsetof(struct rte_mbuf, buf_addr);
	out[1] = offsetof(struct rte_mbuf, data_off);
	out[2] = offsetof(struct rte_mbuf, data_len);
}

/* Loads `n` instructions; r1 is an mbuf when `mbuf` is set, else a raw
 * value. NULL and a message in `err` when rte_bpf refuses them. */
void *dpdk_load(const void *insns, uint32_t n, int mbuf, char *err, size_t errlen)
{
	static struct rte_bpf_xsym xsym[NB_XSYM];
	for (int i = 0; i < NB_XSYM; i++) {
		xsym[i].name = "trivial_helper";
		xsym[i].type = RTE_BPF_XTYPE_FUNC;
		xsym[i].func.val = (uint64_t(*)(uint64_t, uint64_t, uint64_t, uint64_t,
						uint64_t))trivial_helper;
		xsym[i].func.nb_args = 1;
		xsym[i].func.args[0].type = RTE_BPF_ARG_RAW;
		xsym[i].func.args[0].size = sizeof(uint64_t);
		xsym[i].func.ret.type = RTE_BPF_ARG_RAW;
		xsym[i].func.ret.size = sizeof(uint64_t);
	}
	struct rte_bpf_prm prm;
	memset(&prm, 0, sizeof(prm));
	prm.ins = insns;
	prm.nb_ins = n;
	prm.xsym = xsym;
	prm.nb_xsym = NB_XSYM;
	if (mbuf) {
		prm.prog_arg.type = RTE_BPF_ARG_PTR_MBUF;
		prm.prog_arg.size = sizeof(struct rte_mbuf);
		prm.prog_arg.buf_size = BUF_SIZE;
	} else {
		prm.prog_arg.type = RTE_BPF_ARG_RAW;
		prm.prog_arg.size = sizeof(uint64_t);
	}
	/* rte_bpf says why it refuses a program in its log: catch it. */
	char *log = NULL;
	size_t loglen = 0;
	FILE *logf = open_memstream(&log, &loglen);
	if (logf != NULL)
		rte_openlog_stream(logf);
	struct rte_bpf *bpf = rte_bpf_load(&prm);
	int e = rte_errno;
	if (logf != NULL) {
		rte_openlog_stream(NULL);
		fclose(logf);
	}
	if (bpf == NULL) {
		for (char *c = log; c != NULL && *c != 0; c++)
			if (*c == '\n')
				*c = ' ';
		snprintf(err, errlen, "rte_bpf_load refuses it (errno %d): %s", e,
			 log != NULL ? log : "");
	}
	free(log);
	if (bpf == NULL)
		return NULL;
	static struct shim shims[64];
	static int used;
	if (used == 64) {
		snprintf(err, errlen, "too many programs");
		return NULL;
	}
	struct shim *s = &shims[used++];
	s->bpf = bpf;
	struct rte_bpf_jit jit;
	memset(&jit, 0, sizeof(jit));
	s->jit = rte_bpf_get_jit(bpf, &jit) == 0 ? jit.func : NULL;
	return s;
}

/* Whether the program was JIT-compiled. */
int dpdk_has_jit(const void *shim)
{
	return ((const struct shim *)shim)->jit != NULL;
}

/* Runs an mbuf program on the packet (`jit`: the compiled code). */
uint64_t dpdk_run_packet(const void *shim, uint8_t *pkt, uint32_t len, int jit)
{
	const struct shim *s = shim;
	struct rte_mbuf mb;
	mb.buf_addr = (void *)((uintptr_t)pkt - HEADROOM);
	mb.data_off = HEADROOM;
	mb.data_len = (uint16_t)len;
	mb.pkt_len = len;
	mb.buf_len = BUF_SIZE;
	return jit ? s->jit(&mb) : rte_bpf_exec(s->bpf, &mb);
}

/* Runs a raw-argument program. */
uint64_t dpdk_run_raw(const void *shim, uint64_t arg, int jit)
{
	const struct shim *s = shim;
	return jit ? s->jit((void *)(uintptr_t)arg) : rte_bpf_exec(s->bpf, (void *)(uintptr_t)arg);
}
