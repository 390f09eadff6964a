// The coprocessor behind `call`. It serves
//
// * the maps: bpf_map_lookup_elem (1), bpf_map_update_elem (2) and
//   bpf_map_delete_elem (3) on up to NMAPS maps sharing LINES lines, each
//   line a key of up to KEY_BYTES bytes (with its map and, for LPM, its
//   prefix length) and a value slot of VAL_BYTES bytes in the value area of
//   the data memory (region REGION_VALUE, which the core loads and stores
//   through, so a lookup answers a pointer into it, as the VM does). Map i
//   owns lines [base, base + n) (set by the host before runs): an exact
//   match (hash) map searches them as a CAM, an LPM map as a TCAM (the
//   match with the longest prefix wins), an array indexes them;
// * bpf_ktime_get_ns (5: the packet's timestamp from the metadata),
//   bpf_get_smp_processor_id (8: the engine's number), bpf_redirect (23:
//   XDP_REDIRECT with the output port kept for the action module, or
//   XDP_ABORTED for flags), bpf_spin_lock / bpf_spin_unlock (93, 94: one
//   engine runs a program at a time, so no-ops that check the lock is an
//   aligned word of a map value), bpf_redirect_map (51: on a devmap,
//   whose lines hold its present indices; BPF_F_BROADCAST without a
//   lookup; the low flag bits when the index is absent) and
//   bpf_xdp_adjust_meta (54: moves the packet window's low end and the
//   metadata's data_meta word, with the kernel's checks).
//
// A map operation reads its key (and, for an update, copies the value)
// through the data memory's ports, which the core leaves idle while a call
// waits in EXE (the older instructions have left MEM by the second cycle,
// when the first read goes out; the arguments were latched in the first);
// it searches every line of the map at once in the cycle the key's last
// piece lands (the comparators take the landing bytes straight from the
// data memory), picks the line and answers in the next (the answer is
// registered). Anything else (an unknown id or map, a key or value outside the
// packet, stack and value windows) is acknowledged with `bad`: the core
// faults.
module ebpf_coproc #(
    parameter int LATENCY = 1,  // cycles of the fixed-latency helpers before the answer
    parameter logic [63:0] ENGINE_ID = 64'd0,
    parameter int DAW = 17,
    parameter int NMAPS = 8,
    parameter int LINES = 4,  // the simulated model: 1024 (build.rs)
    parameter int KEY_BYTES = 16,
    parameter int VAL_BYTES = 64,
    // 1: one coprocessor serves the maps of several engines (the
    // switch's, ebpf_switch): the packet window's low end comes from the
    // engine it serves (`win_lo_in`) instead of its own register.
    parameter bit SHARED = 1'b0,
    // Bytes of the value region: the lines' slots, then (SHARED) the
    // calling engine's own copy of them, which holds its per-CPU arrays.
    parameter int VALUE_SPAN = LINES * VAL_BYTES
) (
    input  logic           clk,
    input  logic           rst,
    input  logic           req,
    input  logic [31:0]    id,
    input  logic [63:0]    arg1,
    input  logic [63:0]    arg2,
    input  logic [63:0]    arg3,
    input  logic [63:0]    arg4,
    input  logic [63:0]    arg5,
    input  logic [63:0]    timestamp,
    input  logic [31:0]    pkt_lo,
    input  logic [31:0]    pkt_hi,
    input  logic [31:0]    pkt_avail,
    input  logic [31:0]    win_lo_in,
    // The call is taken this cycle (its first; `req` while idle).
    output logic           accept,
    output logic           ack,
    output logic           bad,
    // With `bad`: a map sized down by the host ran out of lines.
    output logic           cap,
    output logic [63:0]    result,
    // The data memory while `busy` (index space of ebpf_dmem).
    output logic           busy,
    output logic [DAW-1:0] mem_raddr,
    input  logic [63:0]    mem_rdata,
    output logic           mem_we,
    output logic [DAW-1:0] mem_waddr,
    output logic [1:0]     mem_wsize,
    output logic [63:0]    mem_wdata,
    // Which map operation the acknowledged call was (0 none, 1 lookup,
    // 2 update, 3 delete) and its cycles from request to acknowledge.
    output logic [1:0]     op_kind,
    output logic [15:0]    op_cycles,
    // The redirect this run set: kind 0 none, 1 bpf_redirect (arg: the
    // port), 2 a devmap entry (map, arg: its index), 3 a devmap broadcast
    // (map, excl: BPF_F_EXCLUDE_INGRESS).
    output logic [1:0]     redir_kind,
    output logic           redir_excl,
    output logic [7:0]     redir_map,
    output logic [31:0]    redir_arg,
    // With `ack`: this call set the redirect above.
    output logic           redir_set,
    // The packet window's low end (data_meta; pkt_lo until adjust_meta).
    output logic [31:0]    win_lo,
    // Host side (between runs): map configuration and lines.
    input  logic           cfg_we,
    input  logic [7:0]     cfg_map,
    input  logic [2:0]     cfg_type,      // 0 none, 1 exact match, 2 LPM, 3 array, 4 devmap,
                                          // 5 per-CPU array
    input  logic [7:0]     cfg_key_size,  // bytes of the key (LPM: 4 + data)
    input  logic [15:0]    cfg_value_size,
    input  logic [15:0]    cfg_base,
    input  logic [15:0]    cfg_n,
    // The map's lines are fewer than it declares (the host sized it
    // down): running out of them is a capacity fault, not the map's
    // "full" answer.
    input  logic           cfg_trunc,
    input  logic           line_we,
    input  logic [15:0]    line_idx,
    input  logic           line_wvalid,
    input  logic [7:0]     line_wmap,
    input  logic [7:0]     line_wplen,
    input  logic [KEY_BYTES*8-1:0] line_wkey,
    output logic           line_rvalid,
    output logic [7:0]     line_rmap,
    output logic [7:0]     line_rplen,
    output logic [KEY_BYTES*8-1:0] line_rkey
);
  `include "ebpf_defs.svh"
  localparam int KB = KEY_BYTES + 8;  // key buffer: an LPM key's prefix length and data
  localparam int LW = $clog2(LINES);
  localparam int STACK_BASE = 8192 - STACK_BYTES;
  localparam int VALUE_BASE = 1 << (DAW - 1);
  localparam int PKT_BASE = META_BYTES;
  localparam logic [31:0] HELPER_MAP_LOOKUP = 32'd1;
  localparam logic [31:0] HELPER_MAP_UPDATE = 32'd2;
  localparam logic [31:0] HELPER_MAP_DELETE = 32'd3;
  localparam logic [31:0] HELPER_KTIME_GET_NS = 32'd5;
  localparam logic [31:0] HELPER_SMP_PROCESSOR_ID = 32'd8;
  localparam logic [31:0] HELPER_REDIRECT = 32'd23;
  localparam logic [31:0] HELPER_SPIN_LOCK = 32'd93;
  localparam logic [31:0] HELPER_SPIN_UNLOCK = 32'd94;
  localparam logic [31:0] HELPER_REDIRECT_MAP = 32'd51;
  localparam logic [31:0] HELPER_XDP_ADJUST_META = 32'd54;
  // The kernel's xdp_frame in front of the headroom (the VM's floor).
  localparam logic [31:0] XDP_FRAME_SIZE = 32'd40;
  localparam logic [63:0] XDP_ABORTED = 64'd0, XDP_REDIRECT = 64'd4;
  localparam logic [2:0] T_LPM = 3'd2, T_ARRAY = 3'd3, T_DEV = 3'd4;  // 1: exact match
  localparam logic [2:0] T_PCPU = 3'd5;  // a per-CPU array: an array per engine
  // Where a per-CPU array's entries are: the lines' slots on one engine,
  // the engine's own copy after them when shared.
  localparam logic [31:0] PCPU_OFF = SHARED ? 32'(LINES * VAL_BYTES) : 32'd0;
  localparam logic [63:0] ENOENT = -64'd2, E2BIG = -64'd7, EEXIST = -64'd17,
                          EINVAL = -64'd22, ENOSPC = -64'd28, EACCES = -64'd13;

  // Map configuration.
  logic [2:0]  m_type [NMAPS];
  logic [7:0]  m_ksize [NMAPS];
  logic [15:0] m_vsize [NMAPS];
  logic        m_trunc [NMAPS];
  logic [15:0] m_base [NMAPS];
  logic [15:0] m_n [NMAPS];
  // Lines.
  logic                  l_valid [LINES];
  logic [7:0]            l_map [LINES];
  logic [7:0]            l_plen [LINES];
  logic [KEY_BYTES*8-1:0] l_key [LINES];

  assign line_rvalid = l_valid[line_idx[LW-1:0]];
  assign line_rmap   = l_map[line_idx[LW-1:0]];
  assign line_rplen  = l_plen[line_idx[LW-1:0]];
  assign line_rkey   = l_key[line_idx[LW-1:0]];

  typedef enum logic [2:0] {S_IDLE, S_WAIT, S_KEY, S_SEARCH, S_PICK, S_VAL, S_META, S_DONE} state_t;
  state_t st;

  logic [1:0]  op;          // 1 lookup, 2 update, 3 delete
  logic [31:0] hid;
  logic [7:0]  wait_cycles;
  logic [15:0] cycles;
  logic [63:0] a_val, a_flags, a_1;
  logic [$clog2(NMAPS)-1:0] mi;
  logic [2:0]  t;
  logic        rmap;        // bpf_redirect_map
  logic [31:0] meta_new;    // adjust_meta's new data_meta
  logic [7:0]  ksize;
  logic [15:0] vsize;
  logic [15:0] base, n;
  logic        trunc;
  // Lines an entry takes: an array's values wider than a line's slot span
  // consecutive lines (entry i at base + i * stride).
  logic [15:0] stride;
  assign stride = (vsize + 16'(VAL_BYTES - 1)) / 16'(VAL_BYTES);
  logic [KB*8-1:0] kbuf;

  // The byte mover: `len` bytes from `src`, in pieces of 8, 4, 2, 1; a
  // piece's bytes arrive the cycle after its read is presented.
  logic [63:0] src;
  logic [15:0] len, issued;
  logic        pend_v;
  logic [15:0] pend_off;
  logic [1:0]  pend_sz;
  logic [LW-1:0] line;  // the line an update writes / an op found
  logic [31:0]   eoff;  // a per-CPU array: PCPU_OFF

  function automatic logic [1:0] piece(input logic [7:0] left);
    if (left >= 8'd8) piece = SZ_DW;
    else if (left >= 8'd4) piece = SZ_W;
    else if (left >= 8'd2) piece = SZ_H;
    else piece = SZ_B;
  endfunction
  function automatic logic [7:0] piece_bytes(input logic [1:0] sz);
    unique case (sz)
      SZ_B:    piece_bytes = 8'd1;
      SZ_H:    piece_bytes = 8'd2;
      SZ_W:    piece_bytes = 8'd4;
      default: piece_bytes = 8'd8;
    endcase
  endfunction

  // A piece's address checked against the packet, stack and value
  // windows: {bad, wait (its packet bytes have not arrived yet), its
  // data memory index}.
  logic [31:0] lo;
  assign lo = SHARED ? win_lo_in : win_lo;
  function automatic logic [DAW+1:0] place(input logic [63:0] a, input logic [7:0] nb);
    logic [32:0] e;
    e = {1'b0, a[31:0]} + {25'd0, nb};
    if (a[63:32] == REGION_PACKET && a[31:0] >= lo && e <= {1'b0, pkt_hi})
      place = {1'b0, e > {1'b0, pkt_avail}, DAW'(PKT_BASE) + a[DAW-1:0]};
    else if (a[63:32] == REGION_STACK && e <= 33'(STACK_BYTES))
      place = {2'b00, DAW'(STACK_BASE) + a[DAW-1:0]};
    else if (a[63:32] == REGION_VALUE && e <= 33'(VALUE_SPAN))
      place = {2'b00, DAW'(VALUE_BASE) + a[DAW-1:0]};
    else
      place = {2'b10, {DAW{1'b0}}};
  endfunction

  // The next piece's address.
  logic [1:0]     nx_sz;
  logic [7:0]     nx_bytes;
  logic [63:0]    nx_addr;
  logic           nx_bad, nx_wait, nx_go;
  logic [DAW-1:0] nx_index;
  always_comb begin
    nx_sz    = piece((len - issued) > 16'd8 ? 8'd8 : 8'(len - issued));
    nx_bytes = piece_bytes(nx_sz);
    nx_addr  = src + {48'd0, issued};
    {nx_bad, nx_wait, nx_index} = place(nx_addr, nx_bytes);
    nx_go = (st == S_KEY || st == S_VAL) && issued < len && !nx_wait && !nx_bad;
  end

  // A map call's first key piece goes out in the call's first cycle
  // (S_IDLE), straight from the arguments (a store in MEM the same cycle
  // reaches it through the data memory's bypass).
  logic [$clog2(NMAPS)-1:0] i_m;
  logic           i_map, i_go, i_bad, i_wait;
  logic [1:0]     i_sz;
  logic [7:0]     i_bytes;
  logic [DAW-1:0] i_index;
  always_comb begin
    i_m = arg1[$clog2(NMAPS)-1:0];
    i_map = (id == HELPER_MAP_LOOKUP || id == HELPER_MAP_UPDATE || id == HELPER_MAP_DELETE)
            && arg1[63:32] == 32'd1 && arg1[31:0] < 32'(NMAPS)
            && m_type[i_m] != 3'd0 && m_type[i_m] != T_DEV && m_ksize[i_m] != 8'd0;
    i_sz = piece(m_ksize[i_m] > 8'd8 ? 8'd8 : m_ksize[i_m]);
    i_bytes = piece_bytes(i_sz);
    {i_bad, i_wait, i_index} = place(arg2, i_bytes);
    i_go = st == S_IDLE && req && !ack && i_map && !i_bad && !i_wait;
  end
  assign mem_raddr = i_go ? i_index : nx_index;
  assign accept    = st == S_IDLE && req && !ack;

  // An update's value lands in its line's slot.
  logic [DAW-1:0] slot_index;
  assign slot_index = DAW'(VALUE_BASE) + DAW'(line) * DAW'(VAL_BYTES) + DAW'(eoff);
  assign busy      = (st != S_IDLE && st != S_WAIT) || i_go;
  // adjust_meta writes data_meta (metadata offset 8) in S_META.
  assign mem_we    = (st == S_VAL && pend_v) || st == S_META;
  assign mem_waddr = st == S_META ? DAW'(8) : slot_index + DAW'(pend_off);
  assign mem_wsize = st == S_META ? SZ_W : pend_sz;
  assign mem_wdata = st == S_META ? {32'd0, meta_new} : mem_rdata;

  // The search key: an exact match's key, an LPM key's prefix length and
  // data, an array's index.
  logic [KEY_BYTES*8-1:0] q_key, q_data;
  logic [31:0]            q_plen_raw, q_index;
  logic [7:0]             q_plen, data_bits_m1;
  logic [8:0]             data_bits;
  // The key buffer with the piece landing this cycle merged in: what the
  // buffer holds from the next cycle on, and what the search compares in
  // the cycle the key's last piece lands.
  logic [KB*8-1:0] kb_next;
  always_comb begin
    kb_next = kbuf;
    if (st == S_KEY && pend_v) begin
      for (int j = 0; j < KB; j++) begin
        if (16'(j) >= pend_off && 16'(j) < pend_off + 16'(piece_bytes(pend_sz)))
          kb_next[j*8 +: 8] = mem_rdata[3'(16'(j) - pend_off)*8 +: 8];
      end
    end
  end
  assign q_key      = kb_next[KEY_BYTES*8-1:0];
  assign q_plen_raw = kb_next[31:0];
  assign q_index    = kb_next[31:0];
  assign q_data     = kb_next[KEY_BYTES*8+31:32];
  assign data_bits  = 9'({ksize - 8'd4, 3'd0});
  assign data_bits_m1 = 8'(data_bits - 9'd1);

  // Mask of the first `plen` bits of a key, in network order (byte 0's
  // high bit first).
  function automatic logic [KEY_BYTES*8-1:0] pmask(input logic [7:0] plen);
    for (int b = 0; b < KEY_BYTES; b++) begin
      for (int k = 0; k < 8; k++) pmask[b*8 + k] = 9'(b*8 + (7 - k)) < {1'b0, plen};
    end
  endfunction

  // LPM lookups match prefixes up to the query's (at most the data's).
  assign q_plen   = ({1'b0, q_plen_raw} > {24'd0, data_bits}) ? 8'(data_bits) : q_plen_raw[7:0];

  logic [LINES-1:0] match, free;

  // bpf_xdp_adjust_meta(ctx, delta): the VM's and kernel's checks (data
  // is pkt_lo: the core has no adjust_head).
  logic [63:0] am_meta, am_len;
  logic [31:0] am_floor;
  logic [63:0] am_result;
  always_comb begin
    am_meta  = {32'd0, win_lo} + {{32{src[31]}}, src[31:0]};
    am_floor = pkt_lo < XDP_FRAME_SIZE ? pkt_lo : XDP_FRAME_SIZE;
    am_len   = {32'd0, pkt_lo} - am_meta;
    if ($signed(am_meta) < $signed({32'd0, am_floor}) || $signed(am_meta) > $signed({32'd0, pkt_lo}))
      am_result = EINVAL;
    else if (am_len[1:0] != 2'd0 || am_len > 64'd32)
      am_result = EACCES;
    else
      am_result = 64'd0;
  end

  // Working variables of the search and pick (blocking, within a cycle).
  /* verilator lint_off BLKSEQ */
  logic s_in_range, s_in_map, h, f;
  logic [7:0] bp;
  logic [LW-1:0] ln, fl;

  logic unused;
  assign unused = ^{arg4[63:8], arg5, a_1[63:32], data_bits_m1, a_flags[63:32], cfg_map, line_idx, kbuf[KB*8-1:KEY_BYTES*8+32]};

  always_ff @(posedge clk) begin
    if (cfg_we) begin
      m_type[cfg_map[$clog2(NMAPS)-1:0]]  <= cfg_type;
      m_ksize[cfg_map[$clog2(NMAPS)-1:0]] <= cfg_key_size;
      m_vsize[cfg_map[$clog2(NMAPS)-1:0]] <= cfg_value_size;
      m_trunc[cfg_map[$clog2(NMAPS)-1:0]] <= cfg_trunc;
      m_base[cfg_map[$clog2(NMAPS)-1:0]]  <= cfg_base;
      m_n[cfg_map[$clog2(NMAPS)-1:0]]     <= cfg_n;
    end
    if (line_we) begin
      l_valid[line_idx[LW-1:0]] <= line_wvalid;
      l_map[line_idx[LW-1:0]]   <= line_wmap;
      l_plen[line_idx[LW-1:0]]  <= line_wplen;
      l_key[line_idx[LW-1:0]]   <= line_wkey;
    end
    if (rst) begin
      st <= S_IDLE;
      ack <= 1'b0;
      bad <= 1'b0;
      cap <= 1'b0;
      result <= 64'd0;
      redir_kind <= 2'd0;
      redir_excl <= 1'b0;
      redir_map <= 8'd0;
      redir_arg <= 32'd0;
      redir_set <= 1'b0;
      win_lo <= pkt_lo;
      op_kind <= 2'd0;
      op_cycles <= 16'd0;
      pend_v <= 1'b0;
    end else begin
      ack <= 1'b0;
      redir_set <= 1'b0;
      if (st != S_IDLE) cycles <= cycles + 16'd1;
      // Pieces read for the key land in the key buffer.
      if (st == S_KEY && pend_v) kbuf <= kb_next;
      pend_v <= nx_go || i_go;
      if (nx_go) begin
        pend_off <= issued;
        pend_sz  <= nx_sz;
        issued   <= issued + 16'(nx_bytes);
      end else if (i_go) begin
        pend_off <= 16'd0;
        pend_sz  <= i_sz;
      end
      unique case (st)
        S_IDLE: if (req && !ack) begin
          hid <= id;
          cycles <= 16'd1;
          a_val <= arg3;
          a_flags <= arg4;
          a_1 <= arg1;
          mi <= arg1[$clog2(NMAPS)-1:0];
          rmap <= id == HELPER_REDIRECT_MAP;
          t <= m_type[arg1[$clog2(NMAPS)-1:0]] == T_PCPU ? T_ARRAY : m_type[arg1[$clog2(NMAPS)-1:0]];
          eoff <= m_type[arg1[$clog2(NMAPS)-1:0]] == T_PCPU ? PCPU_OFF : 32'd0;
          ksize <= m_ksize[arg1[$clog2(NMAPS)-1:0]];
          vsize <= m_vsize[arg1[$clog2(NMAPS)-1:0]];
          trunc <= m_trunc[arg1[$clog2(NMAPS)-1:0]];
          cap <= 1'b0;
          base <= m_base[arg1[$clog2(NMAPS)-1:0]];
          n <= m_n[arg1[$clog2(NMAPS)-1:0]];
          // bpf_redirect_map's key is the index itself, not a pointer.
          kbuf <= (id == HELPER_REDIRECT_MAP) ? (KB*8)'(arg2[31:0]) : '0;
          src <= arg2;
          issued <= i_go ? 16'(i_bytes) : 16'd0;
          len <= 16'(m_ksize[arg1[$clog2(NMAPS)-1:0]]);
          op <= (id == HELPER_MAP_LOOKUP) ? 2'd1 : (id == HELPER_MAP_UPDATE) ? 2'd2
                : (id == HELPER_MAP_DELETE) ? 2'd3 : 2'd0;
          if (id == HELPER_MAP_LOOKUP || id == HELPER_MAP_UPDATE || id == HELPER_MAP_DELETE) begin
            // A map handle is MAP_HANDLES << 32 | index.
            if (arg1[63:32] != 32'd1 || arg1[31:0] >= 32'(NMAPS)
                || m_type[arg1[$clog2(NMAPS)-1:0]] == 3'd0
                || m_type[arg1[$clog2(NMAPS)-1:0]] == T_DEV)
              st <= S_DONE;  // `bad`, set below
            else
              st <= S_KEY;
          end else if (id == HELPER_REDIRECT_MAP) begin
            if (arg1[63:32] != 32'd1 || arg1[31:0] >= 32'(NMAPS)
                || m_type[arg1[$clog2(NMAPS)-1:0]] != T_DEV)
              st <= S_DONE;  // `bad`: not a devmap
            else
              st <= S_SEARCH;
            a_flags <= arg3;
          end else begin
            st <= S_WAIT;
            wait_cycles <= 8'(LATENCY - 1);
          end
          bad <= !(id == HELPER_MAP_LOOKUP || id == HELPER_MAP_UPDATE || id == HELPER_MAP_DELETE
                   || id == HELPER_KTIME_GET_NS || id == HELPER_SMP_PROCESSOR_ID
                   || id == HELPER_REDIRECT || id == HELPER_SPIN_LOCK || id == HELPER_SPIN_UNLOCK
                   || id == HELPER_REDIRECT_MAP || id == HELPER_XDP_ADJUST_META)
                 || (id == HELPER_REDIRECT_MAP
                     && (arg1[63:32] != 32'd1 || arg1[31:0] >= 32'(NMAPS)
                         || m_type[arg1[$clog2(NMAPS)-1:0]] != T_DEV))
                 || ((id == HELPER_SPIN_LOCK || id == HELPER_SPIN_UNLOCK)
                     && !(arg1[63:32] == REGION_VALUE && arg1[1:0] == 2'd0
                          && {1'b0, arg1[31:0]} + 33'd4 <= 33'(VALUE_SPAN)))
                 || ((id == HELPER_MAP_LOOKUP || id == HELPER_MAP_UPDATE || id == HELPER_MAP_DELETE)
                     && (arg1[63:32] != 32'd1 || arg1[31:0] >= 32'(NMAPS)
                         || m_type[arg1[$clog2(NMAPS)-1:0]] == 3'd0
                         || m_type[arg1[$clog2(NMAPS)-1:0]] == T_DEV));
        end
        S_WAIT: begin
          if (wait_cycles == 8'd0 && hid == HELPER_XDP_ADJUST_META) begin
            // Checked; a move writes data_meta next (S_META).
            result <= am_result;
            if (am_result == 64'd0) begin
              win_lo <= am_meta[31:0];
              meta_new <= am_meta[31:0];
              st <= S_META;
            end else begin
              st <= S_DONE;
            end
            op <= 2'd0;
          end else if (wait_cycles == 8'd0) begin
            st <= S_IDLE;
            ack <= 1'b1;
            op_kind <= 2'd0;
            op_cycles <= cycles;
            unique case (hid)
              HELPER_KTIME_GET_NS:     result <= timestamp;
              HELPER_SMP_PROCESSOR_ID: result <= ENGINE_ID;
              HELPER_REDIRECT:         result <= (src != 64'd0) ? XDP_ABORTED : XDP_REDIRECT;
              default:                 result <= 64'd0;
            endcase
            if (hid == HELPER_REDIRECT && src == 64'd0) begin
              redir_set <= 1'b1;
              redir_kind <= 2'd1;
              redir_arg <= a_1[31:0];
            end
          end else begin
            wait_cycles <= wait_cycles - 8'd1;
          end
        end
        S_KEY: begin
          // The last piece lands in the key buffer at this edge, so the
          // search can start next cycle.
          if ((st == S_KEY) && issued < len && nx_bad) begin
            bad <= 1'b1;
            st <= S_DONE;
          end else if (issued >= len) begin
            st <= S_PICK;  // searched below, with the landing piece
          end
        end
        S_SEARCH: st <= S_PICK;  // bpf_redirect_map: searched below
        S_PICK: begin
          // The matching line (LPM: the longest prefix) and the first free one.
          h = 1'b0; f = 1'b0; bp = 8'd0; ln = '0; fl = '0;
          for (int i = 0; i < LINES; i++) begin
            if (match[i] && (!h || l_plen[i] > bp)) begin
              h = 1'b1;
              bp = l_plen[i];
              ln = LW'(i);
            end
            if (free[i] && !f) begin
              f = 1'b1;
              fl = LW'(i);
            end
          end
          // Answered now (ack is registered: the core has it next cycle),
          // unless an update goes on to copy its value.
          st <= S_IDLE;
          ack <= 1'b1;
          op_kind <= op;
          op_cycles <= cycles;
          // An array's line is its index.
          if (t == T_ARRAY) begin
            h = q_index < {16'd0, n};
            ln = LW'(base + q_index[15:0] * stride);
          end
          line <= ln;
          if (rmap) begin
            // bpf_redirect_map: flags beyond the action bits, broadcast
            // and exclude-ingress abort; broadcast needs no entry.
            if ((a_flags & ~64'd27) != 64'd0) result <= XDP_ABORTED;
            else if (a_flags[3]) begin
              result <= XDP_REDIRECT;
              redir_set <= 1'b1;
              redir_kind <= 2'd3;
              redir_excl <= a_flags[4];
              redir_map <= 8'(mi);
            end else if (h) begin
              result <= XDP_REDIRECT;
              redir_set <= 1'b1;
              redir_kind <= 2'd2;
              redir_map <= 8'(mi);
              redir_arg <= q_key[31:0];
            end else if (trunc) begin
              bad <= 1'b1;
              cap <= 1'b1;
            end else result <= a_flags & 64'd3;
          end else if (trunc && !h && ((t == T_ARRAY && op != 2'd3)
                              || (op == 2'd2 && !f && a_flags <= 64'd1
                                  && !(t == T_LPM && q_plen_raw > {23'd0, data_bits})))) begin
            // Beyond the lines the host gave a sized-down map: the VM's
            // answer is unknown here, so the run stops.
            bad <= 1'b1;
            cap <= 1'b1;
          end else if (op == 2'd1) begin
            result <= h ? {REGION_VALUE, 32'(ln) * 32'(VAL_BYTES) + eoff} : 64'd0;
          end else if (op == 2'd3) begin
            if (t == T_ARRAY) result <= EINVAL;
            else if (h) begin
              result <= 64'd0;
              l_valid[ln] <= 1'b0;
            end else result <= ENOENT;
          end else begin
            // Update: BPF_ANY 0, BPF_NOEXIST 1, BPF_EXIST 2.
            if (a_flags > 64'd2) result <= EINVAL;
            else if (t == T_LPM && q_plen_raw > {23'd0, data_bits}) result <= EINVAL;
            else if (t == T_ARRAY && !h) result <= E2BIG;
            else if (t == T_ARRAY && a_flags == 64'd1) result <= EEXIST;
            else if (h && a_flags == 64'd1) result <= EEXIST;
            else if (!h && a_flags == 64'd2) result <= ENOENT;
            else if (!h && !f) result <= (t == T_LPM) ? ENOSPC : E2BIG;
            else begin
              result <= 64'd0;
              if (!h) begin
                line <= fl;
                l_valid[fl] <= 1'b1;
                l_map[fl] <= 8'(mi);
                l_plen[fl] <= (t == T_LPM) ? q_plen_raw[7:0] : 8'(ksize) << 3;
                l_key[fl] <= (t == T_LPM) ? q_data & pmask(q_plen_raw[7:0]) : q_key;
              end
              // Copy the value into the line's slot.
              src <= a_val;
              issued <= 16'd0;
              len <= vsize;
              st <= S_VAL;
              ack <= 1'b0;
            end
          end
        end
        S_VAL: begin
          // The last piece is written this cycle: answered.
          if (issued < len && nx_bad) begin
            bad <= 1'b1;
            st <= S_DONE;
          end else if (issued >= len) begin
            st <= S_IDLE;
            ack <= 1'b1;
            op_kind <= op;
            op_cycles <= cycles;
          end
        end
        S_META: st <= S_DONE;
        S_DONE: begin
          st <= S_IDLE;
          ack <= 1'b1;
          op_kind <= op;
          op_cycles <= cycles;
        end
        default: st <= S_IDLE;
      endcase
      // The search: every line of the map at once (the CAM / TCAM), in
      // the cycle the key completes (S_KEY's last, or S_SEARCH for
      // bpf_redirect_map's index); S_PICK reads the result.
      if (st == S_SEARCH || (st == S_KEY && issued >= len)) for (int i = 0; i < LINES; i++) begin
        s_in_range = 16'(i) >= base && 16'(i) < base + n;
        s_in_map = l_valid[i] && l_map[i] == 8'(mi) && s_in_range;
        free[i] <= !l_valid[i] && s_in_range;
        if (t == T_LPM && op == 2'd1)
          match[i] <= s_in_map && l_plen[i] <= q_plen && (q_data & pmask(l_plen[i])) == l_key[i];
        else if (t == T_LPM)
          match[i] <= s_in_map && {24'd0, l_plen[i]} == q_plen_raw
                      && (q_data & pmask(q_plen_raw[7:0])) == l_key[i];
        else
          match[i] <= s_in_map && l_key[i] == q_key;
      end
    end
  end
  /* verilator lint_on BLKSEQ */
endmodule
