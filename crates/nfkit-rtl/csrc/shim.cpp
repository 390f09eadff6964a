// C ABI around the Verilated RTL core (rtl/ebpf_top.sv), for nfkit-rtl's
// Rust side: create/free a model, write the instruction memory, move data
// memory rows in and out, run until exit, fault or a cycle budget while
// recording the retired pcs, and dump a VCD on request.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "Vebpf_top.h"
#include "verilated.h"
#include "verilated_vcd_c.h"

struct NfkitRtl {
    VerilatedContext ctx;
    Vebpf_top top;
    VerilatedVcdC *vcd = nullptr;
    uint64_t time = 0;
    // Slots to write into the inactive instruction memory during the next
    // run, one per cycle (the rest after it ends).
    std::vector<uint64_t> staged;
    // Packet rows streamed in during the next run, one per accepted cycle.
    std::vector<uint64_t> rx;
    NfkitRtl() : ctx(), top(&ctx, "top") {}
};

struct NfkitRtlIn {
    uint64_t arg1, arg2;
    uint32_t pkt_lo, pkt_hi;
    uint64_t timestamp;
    uint64_t max_cycles;
    uint32_t swap;  // run the other instruction memory version from this run on
    uint32_t stream;  // the packet arrives during the run (nfkit_rtl_stream)
    uint32_t rx_row0;  // its first data memory row
    uint32_t pad;
    // The action module's settings: r0 a verdict (1) or an XDP code (0),
    // the ingress port index, the ports, the host queues (their port
    // indices a byte each, from the low byte) and how many, the fault
    // action.
    uint32_t act_verdicts, act_in_port, act_nports, act_hosts, act_host_n, pad2;
    uint64_t act_fault_verdict;
    // The packet comes in through the engine's port FSM (which writes the
    // metadata and starts the core, the packet streaming in): its length,
    // port index and receive queue; the timestamp is `timestamp`.
    uint32_t via_port, pin_len, pin_port, pin_queue;
};

struct NfkitRtlOut {
    uint64_t r0, cycles, retired, stall_load_use, stall_div, stall_call, stall_rx, flushes,
        trace_len;
    uint32_t fault, fault_pc;
    uint32_t version, pad;
    uint64_t map_ops[3], map_cycles[3];  // lookup, update, delete
    uint64_t out_port;  // 1 << 32 | port when bpf_redirect set one
    // The redirect: kind << 48 | exclude-ingress << 47 | map << 32 | arg
    // (kind 1 port, 2 devmap entry, 3 devmap broadcast; 0 none).
    uint64_t redirect;
    // The action module: action | decision << 8 | fault << 16 | port << 24,
    // the argument, the mask of ports a copy leaves by.
    uint32_t action, action_arg, action_mask, pad3;
    uint64_t fsm_cycles;  // via the port: cycles from the offer to the core's start
};

// The model's coprocessor parameters (build.rs passes them to Verilator
// and here).
#ifndef NFKIT_NMAPS
#define NFKIT_NMAPS 32
#endif
#ifndef NFKIT_KEY_WORDS
#define NFKIT_KEY_WORDS 12
#endif

// One map line as the host sees it (key: little-endian words).
struct NfkitRtlLine {
    uint32_t valid, map, plen, pad;
    uint32_t key[NFKIT_KEY_WORDS];
};

static void tick(NfkitRtl *m) {
    m->top.clk = 0;
    m->top.eval();
    if (m->vcd) m->vcd->dump(m->time);
    m->time++;
    m->top.clk = 1;
    m->top.eval();
    if (m->vcd) m->vcd->dump(m->time);
    m->time++;
}

extern "C" {

void nfkit_rtl_map_config(NfkitRtl *m, uint32_t map, uint32_t type, uint32_t key_size,
                          uint32_t value_size, uint32_t base, uint32_t n, uint32_t trunc);
void nfkit_rtl_line_write(NfkitRtl *m, uint32_t idx, const NfkitRtlLine *l);

NfkitRtl *nfkit_rtl_new(void) {
    NfkitRtl *m = new NfkitRtl();
    m->ctx.traceEverOn(true);
    m->top.rst = 1;
    m->top.stop = 0;
    m->top.start = 0;
    m->top.imem_we = 0;
    m->top.dmem_we = 0;
    m->top.cfg_we = 0;
    m->top.line_we = 0;
    tick(m);
    tick(m);
    m->top.rst = 0;
    // No maps, every line free.
    NfkitRtlLine empty = {};
    for (uint32_t i = 0; i < NFKIT_NMAPS; i++) nfkit_rtl_map_config(m, i, 0, 0, 0, 0, 0, 0);
    for (uint32_t i = 0; i < 1024; i++) nfkit_rtl_line_write(m, i, &empty);
    tick(m);
    return m;
}

void nfkit_rtl_free(NfkitRtl *m) {
    if (!m) return;
    if (m->vcd) {
        m->vcd->close();
        delete m->vcd;
    }
    m->top.final();
    delete m;
}

int nfkit_rtl_vcd_open(NfkitRtl *m, const char *path) {
    if (m->vcd) return 0;
    m->vcd = new VerilatedVcdC();
    m->top.trace(m->vcd, 99);
    m->vcd->open(path);
    return m->vcd->isOpen() ? 0 : -1;
}

// Queues `len` slots to be written into the inactive version while the
// next run executes.
void nfkit_rtl_stage(NfkitRtl *m, const uint64_t *words, uint64_t len) {
    m->staged.assign(words, words + len);
}

// Queues the packet's rows for the next run's stream.
void nfkit_rtl_stream(NfkitRtl *m, const uint64_t *words, uint64_t len) {
    m->rx.assign(words, words + len);
}

void nfkit_rtl_imem_write(NfkitRtl *m, uint32_t slot, uint64_t word) {
    m->top.imem_waddr = slot;
    m->top.imem_wdata = word;
    m->top.imem_we = 1;
    tick(m);
    m->top.imem_we = 0;
}

void nfkit_rtl_dmem_write(NfkitRtl *m, uint32_t row, uint64_t word, uint8_t mask) {
    m->top.dmem_row = row;
    m->top.dmem_wdata = word;
    m->top.dmem_mask = mask;
    m->top.dmem_we = 1;
    tick(m);
    m->top.dmem_we = 0;
}

// Configures map `map` (type 0 none, 1 exact match, 2 LPM, 3 array) on
// lines [base, base + n) (`trunc`: fewer than the map declares).
void nfkit_rtl_map_config(NfkitRtl *m, uint32_t map, uint32_t type, uint32_t key_size,
                          uint32_t value_size, uint32_t base, uint32_t n, uint32_t trunc) {
    m->top.cfg_map = map;
    m->top.cfg_type = type;
    m->top.cfg_key_size = key_size;
    m->top.cfg_value_size = value_size;
    m->top.cfg_base = base;
    m->top.cfg_n = n;
    m->top.cfg_trunc = trunc;
    m->top.cfg_we = 1;
    tick(m);
    m->top.cfg_we = 0;
}

void nfkit_rtl_line_write(NfkitRtl *m, uint32_t idx, const NfkitRtlLine *l) {
    m->top.line_idx = idx;
    m->top.line_wvalid = l->valid ? 1 : 0;
    m->top.line_wmap = l->map;
    m->top.line_wplen = l->plen;
    for (int w = 0; w < NFKIT_KEY_WORDS; w++) m->top.line_wkey[w] = l->key[w];
    m->top.line_we = 1;
    tick(m);
    m->top.line_we = 0;
}

// Lines read combinationally: present the index, settle.
void nfkit_rtl_line_read(NfkitRtl *m, uint32_t idx, NfkitRtlLine *l) {
    m->top.line_idx = idx;
    m->top.eval();
    l->valid = m->top.line_rvalid;
    l->map = m->top.line_rmap;
    l->plen = m->top.line_rplen;
    for (int w = 0; w < NFKIT_KEY_WORDS; w++) l->key[w] = m->top.line_rkey[w];
}

// The data memory reads synchronously: present the row, clock, read.
uint64_t nfkit_rtl_dmem_read(NfkitRtl *m, uint32_t row) {
    m->top.dmem_row = row;
    m->top.dmem_we = 0;
    tick(m);
    return m->top.dmem_rdata;
}

// 0: the program ended (exit or fault, see out->fault); 1: the cycle
// budget ran out first. Retired pcs beyond trace_cap are counted, not kept.
int nfkit_rtl_run(NfkitRtl *m, const NfkitRtlIn *in, NfkitRtlOut *out, uint32_t *trace,
                  uint64_t trace_cap) {
    m->top.arg1 = in->arg1;
    m->top.arg2 = in->arg2;
    m->top.pkt_lo = in->pkt_lo;
    m->top.pkt_hi = in->pkt_hi;
    m->top.timestamp = in->timestamp;
    m->top.imem_swap = in->swap ? 1 : 0;
    m->top.stream = in->stream ? 1 : 0;
    m->top.rx_row0 = in->rx_row0;
    m->top.rx_valid = 0;
    m->top.act_verdicts = in->act_verdicts ? 1 : 0;
    m->top.act_in_port = in->act_in_port;
    m->top.act_nports = in->act_nports;
    m->top.act_hosts = in->act_hosts;
    m->top.act_host_n = in->act_host_n;
    m->top.act_fault_verdict = in->act_fault_verdict;
    const bool stream = in->stream || in->via_port;
    m->top.start = 0;
    m->top.pin_valid = 0;
    size_t rx = 0;
    // One packet row offered per cycle; taken when the engine is ready.
    auto offer = [&]() {
        bool valid = stream && rx < m->rx.size();
        m->top.rx_valid = valid ? 1 : 0;
        if (valid) m->top.rx_data = m->rx[rx];
        return valid && m->top.rx_ready;
    };
    size_t staged = 0;
    // One staged slot per cycle, from the start edge on.
    auto stage_one = [&]() {
        if (staged < m->staged.size()) {
            m->top.imem_we = 1;
            m->top.imem_waddr = (uint32_t)staged;
            m->top.imem_wdata = m->staged[staged];
            staged++;
        } else {
            m->top.imem_we = 0;
        }
    };
    out->fsm_cycles = 0;
    if (in->via_port) {
        // Offered once; the FSM takes it while idle, writes the metadata
        // rows and starts the core.
        m->top.pin_len = in->pin_len;
        m->top.pin_port = in->pin_port;
        m->top.pin_queue = in->pin_queue;
        m->top.pin_ts = in->timestamp;
        m->top.pin_valid = 1;
        m->top.imem_we = 0;
        do {
            tick(m);
            m->top.pin_valid = 0;
            out->fsm_cycles++;
        } while (!m->top.running && out->fsm_cycles < 64);
    } else {
        m->top.start = 1;
        stage_one();
        tick(m);
    }
    m->top.start = 0;
    m->top.imem_swap = 0;
    uint64_t n = 0, cycles = 0;
    int rc = 0;
    m->top.clk = 0;
    m->top.eval();
    while (!m->top.done) {
        if (cycles >= in->max_cycles) {
            rc = 1;
            break;
        }
        if (m->top.retire_valid) {
            if (trace && n < trace_cap) trace[n] = m->top.retire_pc;
            n++;
        }
        stage_one();
        bool taken = offer();
        tick(m);
        if (taken) rx++;
        cycles++;
    }
    m->top.rx_valid = 0;
    out->version = m->top.imem_version;
    while (staged < m->staged.size()) {
        stage_one();
        tick(m);
    }
    m->top.imem_we = 0;
    m->staged.clear();
    // The rest of the packet arrives after the program is done.
    if (stream) {
        for (; rx < m->rx.size(); rx++) {
            m->top.dmem_row = in->rx_row0 + (uint32_t)rx;
            m->top.dmem_wdata = m->rx[rx];
            m->top.dmem_mask = 0xff;
            m->top.dmem_we = 1;
            tick(m);
        }
        m->top.dmem_we = 0;
    }
    m->rx.clear();
    out->r0 = m->top.r0;
    out->cycles = m->top.cnt_cycles;
    out->retired = m->top.cnt_retired;
    out->stall_load_use = m->top.cnt_stall_load_use;
    out->stall_div = m->top.cnt_stall_div;
    out->stall_call = m->top.cnt_stall_call;
    out->stall_rx = m->top.cnt_stall_rx;
    out->flushes = m->top.cnt_flush;
    out->trace_len = n;
    for (int k = 0; k < 3; k++) {
        out->map_ops[k] = (uint64_t)m->top.cnt_map_ops[2 * k] |
                          ((uint64_t)m->top.cnt_map_ops[2 * k + 1] << 32);
        out->map_cycles[k] = (uint64_t)m->top.cnt_map_cycles[2 * k] |
                             ((uint64_t)m->top.cnt_map_cycles[2 * k + 1] << 32);
    }
    out->fault = m->top.fault;
    out->fault_pc = m->top.fault_pc;
    out->out_port = m->top.redir_kind == 1 ? ((1ull << 32) | m->top.redir_arg) : 0;
    out->redirect = ((uint64_t)m->top.redir_kind << 48) | ((uint64_t)m->top.redir_excl << 47) |
                    ((uint64_t)m->top.redir_map << 32) | m->top.redir_arg;
    m->top.eval();
    out->action = (uint32_t)m->top.act_action | ((uint32_t)m->top.act_decision << 8) |
                  ((uint32_t)m->top.act_fault << 16) | ((uint32_t)m->top.act_out_port << 24);
    out->action_arg = m->top.act_arg;
    out->action_mask = m->top.act_out_mask;
    if (rc == 1) {
        // Stop the core: it waits idle for the next run.
        m->top.stop = 1;
        tick(m);
        m->top.stop = 0;
    }
    if (m->vcd) m->vcd->flush();
    return rc;
}

}  // extern "C"
