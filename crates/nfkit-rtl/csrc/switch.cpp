// C ABI around the Verilated switch top (rtl/ebpf_switch.sv), for
// nfkit-rtl's `Switch`: packets are queued per input port with the cycle
// they arrive at; `nfkit_sw_run` clocks the switch, feeding each port's
// headers and rows as its link would, writing staged instruction memory
// slots whenever the switch lets it (and swapping once they are all
// written), and records every engine's finished run and every packet
// leaving an output, until everything queued has left.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "Vebpf_switch.h"
#include "verilated.h"

#ifndef NFKIT_SW_PORTS
#define NFKIT_SW_PORTS 4
#endif
#ifndef NFKIT_SW_ENGINES
#define NFKIT_SW_ENGINES 4
#endif
static const unsigned PORTS = NFKIT_SW_PORTS;
static const unsigned ENGINES = NFKIT_SW_PORTS * NFKIT_SW_ENGINES;
static const unsigned OUTS = NFKIT_SW_PORTS + 2;

// Fields of Verilator's port types, by bit offset.
template <typename T>
static void put(T &sig, unsigned lsb, unsigned width, uint64_t v) {
    uint64_t mask = width >= 64 ? ~0ull : ((1ull << width) - 1);
    sig = (T)(((uint64_t)sig & ~(mask << lsb)) | ((v & mask) << lsb));
}
template <std::size_t N>
static void put(VlWide<N> &sig, unsigned lsb, unsigned width, uint64_t v) {
    for (unsigned b = 0; b < width; b++) {
        unsigned i = lsb + b;
        uint32_t bit = (uint32_t)((v >> b) & 1);
        sig[i / 32] = (sig[i / 32] & ~(1u << (i % 32))) | (bit << (i % 32));
    }
}
template <typename T>
static uint64_t get(const T &sig, unsigned lsb, unsigned width) {
    uint64_t mask = width >= 64 ? ~0ull : ((1ull << width) - 1);
    return ((uint64_t)sig >> lsb) & mask;
}
template <std::size_t N>
static uint64_t get(const VlWide<N> &sig, unsigned lsb, unsigned width) {
    uint64_t v = 0;
    for (unsigned b = 0; b < width; b++) {
        unsigned i = lsb + b;
        v |= (uint64_t)((sig[i / 32] >> (i % 32)) & 1) << b;
    }
    return v;
}

#ifndef NFKIT_KEY_WORDS
#define NFKIT_KEY_WORDS 4
#endif
#ifndef NFKIT_NMAPS
#define NFKIT_NMAPS 8
#endif
#ifndef NFKIT_LINES
#define NFKIT_LINES 4
#endif

// One map line of the shared coprocessor (as the engine shim's).
struct NfkitSwLine {
    uint32_t valid, map, plen, pad;
    uint32_t key[NFKIT_KEY_WORDS];
};

// One engine's finished run.
struct NfkitSwResult {
    uint64_t id, r0, cycles, retired, stall_load_use, stall_div, stall_call, stall_rx, stall_val,
        flushes, redirect;
    uint64_t t_in, t_done;  // cycles: the handoff to the engine, the run's end
    uint32_t fault, fault_pc, budget, version, engine, port;
    uint32_t action, action_arg, action_mask, dest, len, pad;
};

// One packet leaving an output (its bytes alongside).
struct NfkitSwOut {
    uint64_t id, cycle;
    uint32_t out, engine, len, pad;
};

struct Pending {
    uint64_t id, at, ts;
    std::vector<uint8_t> data;
};

struct NfkitSw {
    VerilatedContext ctx;
    Vebpf_switch top;
    uint64_t now = 0;
    std::deque<Pending> queue[NFKIT_SW_PORTS];
    // The packet each port is streaming, and its next row.
    bool streaming[NFKIT_SW_PORTS] = {};
    Pending cur[NFKIT_SW_PORTS];
    size_t row[NFKIT_SW_PORTS] = {};
    // The packet each engine holds.
    uint64_t eng_pkt[NFKIT_SW_PORTS * NFKIT_SW_ENGINES] = {};
    uint64_t eng_len[NFKIT_SW_PORTS * NFKIT_SW_ENGINES] = {};
    uint64_t eng_t_in[NFKIT_SW_PORTS * NFKIT_SW_ENGINES] = {};
    uint64_t prev_fin = 0;
    // An output's packet being received.
    bool in_out[NFKIT_SW_PORTS + 2] = {};
    uint32_t out_eng[NFKIT_SW_PORTS + 2] = {};
    std::vector<uint8_t> out_bytes[NFKIT_SW_PORTS + 2];
    std::vector<NfkitSwResult> results;
    std::vector<NfkitSwOut> outs;
    std::vector<std::vector<uint8_t>> out_data;
    // Programs to write into the inactive version, each then swapped in,
    // in order.
    std::deque<std::vector<uint64_t>> staged;
    size_t staged_at = 0;
    uint64_t swaps = 0, last_swap = 0;
    NfkitSw() : ctx(), top(&ctx, "sw") {}
};

static void edge(NfkitSw *m) {
    m->top.clk = 1;
    m->top.eval();
    m->top.clk = 0;
    m->top.eval();
    m->now++;
}

extern "C" {

void nfkit_sw_map_config(NfkitSw *m, uint32_t map, uint32_t type, uint32_t key_size,
                         uint32_t value_size, uint32_t base, uint32_t n, uint32_t trunc);
void nfkit_sw_line_write(NfkitSw *m, uint32_t idx, const NfkitSwLine *l);

NfkitSw *nfkit_sw_new(void) {
    NfkitSw *m = new NfkitSw();
    m->top.rst = 1;
    m->top.clk = 0;
    m->top.eval();
    edge(m);
    edge(m);
    m->top.rst = 0;
    m->top.budget = 10000000;
    m->top.eng_en = (uint16_t)((1ull << ENGINES) - 1);
    edge(m);
    // No maps, every line free.
    NfkitSwLine empty = {};
    for (uint32_t i = 0; i < NFKIT_NMAPS; i++) nfkit_sw_map_config(m, i, 0, 0, 0, 0, 0, 0);
    for (uint32_t i = 0; i < NFKIT_LINES; i++) nfkit_sw_line_write(m, i, &empty);
    m->now = 0;
    return m;
}

// The shared coprocessor's maps and lines and the data memory rows
// (written to every engine and, in the value area, to the shared value
// memory; read from engine 0 or the value memory), between streams only.
void nfkit_sw_map_config(NfkitSw *m, uint32_t map, uint32_t type, uint32_t key_size,
                         uint32_t value_size, uint32_t base, uint32_t n, uint32_t trunc) {
    m->top.cfg_map = map;
    m->top.cfg_type = type;
    m->top.cfg_key_size = key_size;
    m->top.cfg_value_size = value_size;
    m->top.cfg_base = base;
    m->top.cfg_n = n;
    m->top.cfg_trunc = trunc;
    m->top.cfg_we = 1;
    m->top.eval();
    edge(m);
    m->top.cfg_we = 0;
}

void nfkit_sw_line_write(NfkitSw *m, uint32_t idx, const NfkitSwLine *l) {
    m->top.line_idx = idx;
    m->top.line_wvalid = l->valid ? 1 : 0;
    m->top.line_wmap = l->map;
    m->top.line_wplen = l->plen;
    for (int w = 0; w < NFKIT_KEY_WORDS; w++) m->top.line_wkey[w] = l->key[w];
    m->top.line_we = 1;
    m->top.eval();
    edge(m);
    m->top.line_we = 0;
}

void nfkit_sw_line_read(NfkitSw *m, uint32_t idx, NfkitSwLine *l) {
    m->top.line_idx = idx;
    m->top.eval();
    l->valid = m->top.line_rvalid;
    l->map = m->top.line_rmap;
    l->plen = m->top.line_rplen;
    for (int w = 0; w < NFKIT_KEY_WORDS; w++) l->key[w] = m->top.line_rkey[w];
}

void nfkit_sw_dmem_write(NfkitSw *m, uint32_t row, uint64_t word, uint8_t mask) {
    m->top.dmem_row = row;
    m->top.dmem_wdata = word;
    m->top.dmem_mask = mask;
    m->top.dmem_we = 1;
    m->top.eval();
    edge(m);
    m->top.dmem_we = 0;
}

// Rows of the shared value memory (value offset / 8).
void nfkit_sw_vmem_write(NfkitSw *m, uint32_t row, uint64_t word, uint8_t mask) {
    m->top.vmem_row = row;
    m->top.dmem_wdata = word;
    m->top.dmem_mask = mask;
    m->top.vmem_we = 1;
    m->top.eval();
    edge(m);
    m->top.vmem_we = 0;
}

uint64_t nfkit_sw_vmem_read(NfkitSw *m, uint32_t row) {
    m->top.vmem_row = row;
    m->top.vmem_we = 0;
    m->top.eval();
    edge(m);
    m->top.eval();
    return m->top.vmem_rdata;
}

uint64_t nfkit_sw_dmem_read(NfkitSw *m, uint32_t row, uint32_t engine) {
    m->top.dmem_row = row;
    m->top.dmem_we = 0;
    m->top.sel_eng = engine;
    m->top.eval();
    edge(m);
    m->top.eval();
    return m->top.dmem_rdata;
}

void nfkit_sw_free(NfkitSw *m) {
    if (!m) return;
    m->top.final();
    delete m;
}

uint32_t nfkit_sw_ports(void) { return PORTS; }
uint32_t nfkit_sw_engines(void) { return NFKIT_SW_ENGINES; }

// Engines the demux may use (bit e: engine e), the cycle budget of a
// packet, the action modules' settings.
void nfkit_sw_config(NfkitSw *m, uint64_t eng_en, uint32_t budget, uint32_t verdicts,
                     uint32_t nports, uint32_t hosts, uint32_t host_n, uint64_t fault_verdict) {
    m->top.eng_en = (uint16_t)eng_en;
    m->top.budget = budget;
    m->top.act_verdicts = verdicts ? 1 : 0;
    m->top.act_nports = nports;
    m->top.act_hosts = hosts;
    m->top.act_host_n = host_n;
    m->top.act_fault_verdict = fault_verdict;
}

// Writes `len` slots into the inactive version now and makes it the
// current one (the switch must hold no packet on that version: between
// streams).
void nfkit_sw_load(NfkitSw *m, const uint64_t *words, uint64_t len) {
    for (uint64_t i = 0; i < len; i++) {
        m->top.imem_we = 1;
        m->top.imem_waddr = (uint32_t)i;
        m->top.imem_wdata = words[i];
        m->top.eval();
        edge(m);
    }
    m->top.imem_we = 0;
    m->top.imem_swap = 1;
    m->top.eval();
    edge(m);
    m->top.imem_swap = 0;
    m->swaps++;
    m->last_swap = m->now;
}

// Queues slots for the inactive version, written one a cycle while the
// switch runs (whenever no engine holds a packet of that version), then
// swapped in.
void nfkit_sw_stage(NfkitSw *m, const uint64_t *words, uint64_t len) {
    m->staged.emplace_back(words, words + len);
}

uint64_t nfkit_sw_swaps(NfkitSw *m, uint64_t *last) {
    *last = m->last_swap;
    return m->swaps;
}

uint64_t nfkit_sw_now(NfkitSw *m) { return m->now; }

// Queues a packet on `port`, arriving from cycle `at` on.
void nfkit_sw_offer(NfkitSw *m, uint32_t port, uint64_t id, const uint8_t *data, uint64_t len,
                    uint64_t ts, uint64_t at) {
    Pending p;
    p.id = id;
    p.at = at;
    p.ts = ts;
    p.data.assign(data, data + len);
    m->queue[port % PORTS].push_back(std::move(p));
}

static void read_result(NfkitSw *m, uint32_t e) {
    m->top.sel_eng = e;
    m->top.eval();
    NfkitSwResult r = {};
    r.id = m->eng_pkt[e];
    r.r0 = m->top.sel_r0;
    r.cycles = m->top.sel_cycles;
    r.retired = m->top.sel_retired;
    r.stall_load_use = m->top.sel_stall_load_use;
    r.stall_div = m->top.sel_stall_div;
    r.stall_call = m->top.sel_stall_call;
    r.stall_rx = m->top.sel_stall_rx;
    r.stall_val = m->top.sel_stall_val;
    r.flushes = m->top.sel_flush;
    r.redirect = m->top.sel_redirect;
    r.t_in = m->eng_t_in[e];
    r.t_done = m->now;
    r.fault = m->top.sel_fault;
    r.fault_pc = m->top.sel_fault_pc;
    r.budget = m->top.sel_budget;
    r.version = m->top.sel_version;
    r.engine = e;
    r.port = e / NFKIT_SW_ENGINES;
    r.action = m->top.sel_action;
    r.action_arg = m->top.sel_action_arg;
    r.action_mask = m->top.sel_action_mask;
    r.dest = m->top.sel_dest;
    r.len = m->top.sel_len;
    m->results.push_back(r);
}

// Clocks the switch until every queued packet has arrived, run and left
// (0), or for `max_cycles` (1).
int nfkit_sw_run(NfkitSw *m, uint64_t max_cycles) {
    uint64_t end = m->now + max_cycles;
    for (;;) {
        // (A packet's last row leaves a cycle after its engine is free.)
        bool idle = m->top.eng_busy == 0 && m->top.out_valid == 0 && m->staged.empty();
        for (unsigned p = 0; p < PORTS; p++) idle = idle && !m->streaming[p] && m->queue[p].empty();
        for (unsigned o = 0; o < OUTS; o++) idle = idle && !m->in_out[o];
        if (idle) return 0;
        if (m->now >= end) return 1;
        // Inputs.
        for (unsigned p = 0; p < PORTS; p++) {
            bool hv = !m->streaming[p] && !m->queue[p].empty() && m->queue[p].front().at <= m->now;
            put(m->top.in_valid, p, 1, hv);
            if (hv) {
                put(m->top.in_len, 16 * p, 16, m->queue[p].front().data.size());
                put(m->top.in_ts, 64 * p, 64, m->queue[p].front().ts);
            }
            bool rv = m->streaming[p] && m->row[p] * 8 < m->cur[p].data.size();
            put(m->top.rx_valid, p, 1, rv);
            if (rv) {
                uint8_t w[8] = {};
                size_t at = m->row[p] * 8;
                size_t n = m->cur[p].data.size() - at;
                memcpy(w, m->cur[p].data.data() + at, n < 8 ? n : 8);
                uint64_t word;
                memcpy(&word, w, 8);
                put(m->top.rx_data, 64 * p, 64, word);
            }
        }
        bool staging = !m->staged.empty() && m->staged_at < m->staged.front().size();
        m->top.imem_we = staging ? 1 : 0;
        if (staging) {
            m->top.imem_waddr = (uint32_t)m->staged_at;
            m->top.imem_wdata = m->staged.front()[m->staged_at];
        }
        m->top.imem_swap = (!staging && !m->staged.empty()) ? 1 : 0;
        m->top.eval();
        // What this cycle's edge does.
        if (staging && m->top.imem_wready) m->staged_at++;
        if (m->top.imem_swap) {
            m->staged.pop_front();
            m->staged_at = 0;
            m->swaps++;
            m->last_swap = m->now;
        }
        // Outputs first: a packet's last row leaves in the cycle its
        // engine may already take the next packet.
        for (unsigned o = 0; o < OUTS; o++) {
            if (!get(m->top.out_valid, o, 1)) continue;
            if (get(m->top.out_first, o, 1)) {
                m->in_out[o] = true;
                m->out_eng[o] = (uint32_t)get(m->top.out_eng, 8 * o, 8);
                m->out_bytes[o].clear();
            }
            uint64_t word = get(m->top.out_data, 64 * o, 64);
            for (int b = 0; b < 8; b++) m->out_bytes[o].push_back((uint8_t)(word >> (8 * b)));
            if (get(m->top.out_last, o, 1)) {
                uint32_t e = m->out_eng[o];
                NfkitSwOut r = {};
                r.id = m->eng_pkt[e];
                r.cycle = m->now;
                r.out = o;
                r.engine = e;
                r.len = (uint32_t)m->eng_len[e];
                m->out_bytes[o].resize(r.len);
                m->outs.push_back(r);
                m->out_data.push_back(m->out_bytes[o]);
                m->in_out[o] = false;
            }
        }
        for (unsigned p = 0; p < PORTS; p++) {
            if (get(m->top.in_valid, p, 1) && get(m->top.in_ready, p, 1)) {
                uint32_t e = (uint32_t)get(m->top.in_eng, 8 * p, 8);
                m->cur[p] = std::move(m->queue[p].front());
                m->queue[p].pop_front();
                m->streaming[p] = !m->cur[p].data.empty();
                m->row[p] = 0;
                m->eng_pkt[e] = m->cur[p].id;
                m->eng_len[e] = m->cur[p].data.size();
                m->eng_t_in[e] = m->now;
            } else if (get(m->top.rx_valid, p, 1) && get(m->top.rx_ready, p, 1)) {
                m->row[p]++;
                if (m->row[p] * 8 >= m->cur[p].data.size()) m->streaming[p] = false;
            }
        }
        uint64_t fin = (uint64_t)m->top.eng_fin;
        for (unsigned e = 0; e < ENGINES; e++) {
            if (((fin >> e) & 1) && !((m->prev_fin >> e) & 1)) read_result(m, e);
        }
        m->prev_fin = fin;
        edge(m);
        m->top.imem_swap = 0;
    }
}

// The finished runs since the last call (up to `cap`; the rest stay).
uint64_t nfkit_sw_results(NfkitSw *m, NfkitSwResult *buf, uint64_t cap) {
    uint64_t n = m->results.size() < cap ? m->results.size() : cap;
    for (uint64_t i = 0; i < n; i++) buf[i] = m->results[i];
    m->results.erase(m->results.begin(), m->results.begin() + (long)n);
    return n;
}

uint64_t nfkit_sw_out_count(NfkitSw *m) { return m->outs.size(); }

// Output record `i` and its bytes (`bytes` has room for `cap`).
void nfkit_sw_out_get(NfkitSw *m, uint64_t i, NfkitSwOut *rec, uint8_t *bytes, uint64_t cap) {
    *rec = m->outs[i];
    const std::vector<uint8_t> &d = m->out_data[i];
    memcpy(bytes, d.data(), d.size() < cap ? d.size() : cap);
}

void nfkit_sw_out_clear(NfkitSw *m) {
    m->outs.clear();
    m->out_data.clear();
}

}  // extern "C"
