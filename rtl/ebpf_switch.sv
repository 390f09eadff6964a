// The switch top, after eBPFlow: PORTS input ports with ENGINES engines
// each (ebpf_top, the engine as one-engine runs use it), one instruction
// memory shared by all engines, an output arbiter per output and the
// crossbar between the engines and the outputs.
//
// * In: per port a packet header (`in_valid`, length, timestamp) and then
//   its 8-byte rows (`rx_*`), as a serial link delivers them. The port's
//   round-robin demux hands each packet to the next idle enabled engine
//   of the port (from the one after the last it chose); the engine's FSM
//   writes the metadata and starts its core with the rows streaming in.
//   A port takes its next header once every row of the previous packet
//   has landed; rows arriving after the program is done are written
//   through the engine's host port.
// * Instruction memory: two versions; the engines fetch from it through
//   one read port each (`ebpf_imem_shared`). The host writes the inactive
//   version (`imem_wready`: no engine still runs on it) and `imem_swap`
//   makes it the current one. An engine takes the current version at the
//   start of each packet and keeps it to the packet's end, so every packet
//   runs wholly on one version, and the old version is written again only
//   once every engine has left it.
// * Out: the engine's action module decides the outputs: ports
//   0..PORTS-1 (one port, or a flood mask), PORTS the controller, PORTS+1
//   the discard tap (drops, faults and runs past `budget`; a device
//   leaves it unconnected, the testbench reads it). Each output's arbiter
//   grants, round-robin, one of the engines whose finished packet still
//   goes there; the crossbar then streams that engine's packet rows to
//   it, one per cycle (`out_*`, a cycle after the read). Outputs that
//   grant the same engine in the same cycle share the pass (one read of
//   the engine's data memory feeds them all). The engine is free again
//   once every output of its packet has had it.
// * Maps: one coprocessor for all engines, as eBPFlow shares one between
//   its groups. An engine's map call (lookup, update, delete,
//   bpf_redirect_map, spin lock and unlock) waits in its EXE stage until
//   the coprocessor's round-robin arbiter takes it; the coprocessor reads
//   the key through that engine's data memory and answers it alone. Map
//   values are in one value memory: a core's load, store or atomic on a
//   value asks for its port and waits in EXE until granted (one engine a
//   cycle, round-robin, none while the coprocessor works), so every
//   access, atomics included, is one indivisible read-then-write on the
//   one copy. A spin lock is held for real: a lock call on a value word
//   another engine holds waits until that engine unlocks it (or its run
//   ends). The other helpers (time, processor id, bpf_redirect,
//   adjust_meta) stay on each engine's own coprocessor.
module ebpf_switch
#(
    parameter int PORTS = 4,
    parameter int ENGINES = 4,  // per port
    parameter int IAW = 12,
    parameter int DAW = 17,
    // The shared coprocessor's maps (the simulated model: build.rs).
    parameter int NMAPS = 8,
    parameter int LINES = 4,
    parameter int KEY_BYTES = 16,
    parameter int VAL_BYTES = 64
) (
    input  logic                   clk,
    input  logic                   rst,
    input  logic [PORTS*ENGINES-1:0] eng_en,  // engines the demux may use
    input  logic [31:0]            budget,    // cycles a packet may run
    // Host: the instruction memory.
    input  logic                   imem_swap,
    output logic                   imem_cur,
    output logic                   imem_wready,
    input  logic                   imem_we,
    input  logic [IAW-1:0]         imem_waddr,
    input  logic [63:0]            imem_wdata,
    // Ports in.
    input  logic [PORTS-1:0]       in_valid,
    output logic [PORTS-1:0]       in_ready,
    output logic [PORTS*8-1:0]     in_eng,    // the engine a header goes to
    input  logic [PORTS*16-1:0]    in_len,
    input  logic [PORTS*64-1:0]    in_ts,
    input  logic [PORTS-1:0]       rx_valid,
    output logic [PORTS-1:0]       rx_ready,
    input  logic [PORTS*64-1:0]    rx_data,
    // Outputs: ports, the controller, the discard tap.
    output logic [PORTS+1:0]       out_valid,
    output logic [PORTS+1:0]       out_first,
    output logic [PORTS+1:0]       out_last,
    output logic [(PORTS+2)*8-1:0] out_eng,
    output logic [(PORTS+2)*64-1:0] out_data,
    // Engine state: holding a packet; its core has finished it.
    output logic [PORTS*ENGINES-1:0] eng_busy,
    output logic [PORTS*ENGINES-1:0] eng_fin,
    // The action modules' settings (all engines).
    input  logic                   act_verdicts,
    input  logic [7:0]             act_nports,
    input  logic [63:0]            act_fault_verdict,
    input  logic [31:0]            act_hosts,
    input  logic [7:0]             act_host_n,
    // Host: data memory rows (writes to every engine, reads from
    // `sel_eng`), only while no packet is in the switch.
    input  logic [DAW-4:0]         dmem_row,
    input  logic                   dmem_we,
    input  logic [7:0]             dmem_mask,
    input  logic [63:0]            dmem_wdata,
    output logic [63:0]            dmem_rdata,
    // Host: rows of the shared value memory (8 bytes each: value offset
    // / 8), only while no packet is in the switch.
    input  logic [23:0]            vmem_row,
    input  logic                   vmem_we,
    output logic [63:0]            vmem_rdata,
    // Host: map configuration and lines (writes to every engine).
    input  logic                   cfg_we,
    input  logic [7:0]             cfg_map,
    input  logic [2:0]             cfg_type,
    input  logic [7:0]             cfg_key_size,
    input  logic [15:0]            cfg_value_size,
    input  logic [15:0]            cfg_base,
    input  logic [15:0]            cfg_n,
    input  logic                   cfg_trunc,
    input  logic                   line_we,
    input  logic [15:0]            line_idx,
    input  logic                   line_wvalid,
    input  logic [7:0]             line_wmap,
    input  logic [7:0]             line_wplen,
    input  logic [KEY_BYTES*8-1:0] line_wkey,
    output logic                   line_rvalid,
    output logic [7:0]             line_rmap,
    output logic [7:0]             line_rplen,
    output logic [KEY_BYTES*8-1:0] line_rkey,
    // One engine's finished run, as the host reads it (`sel_eng`).
    input  logic [7:0]             sel_eng,
    output logic [63:0]            sel_r0,
    output logic [2:0]             sel_fault,
    output logic [IAW-1:0]         sel_fault_pc,
    output logic                   sel_budget,
    output logic                   sel_version,
    output logic [15:0]            sel_len,
    output logic [PORTS+1:0]       sel_dest,
    output logic [63:0]            sel_cycles,
    output logic [63:0]            sel_retired,
    output logic [63:0]            sel_stall_load_use,
    output logic [63:0]            sel_stall_div,
    output logic [63:0]            sel_stall_call,
    output logic [63:0]            sel_stall_rx,
    output logic [63:0]            sel_stall_val,
    output logic [63:0]            sel_flush,
    output logic [63:0]            sel_redirect,  // kind << 48 | excl << 47 | map << 32 | arg
    output logic [31:0]            sel_action,    // action | decision << 8 | fault << 16 | port << 24
    output logic [31:0]            sel_action_arg,
    output logic [31:0]            sel_action_mask
);
  localparam int E = PORTS * ENGINES;
  localparam int O = PORTS + 2;
  localparam int EW = E > 1 ? $clog2(E) : 1;
  localparam int KW = ENGINES > 1 ? $clog2(ENGINES) : 1;
  localparam int RW = DAW - 3;
  // The packet's first row: metadata, then the XDP headroom.
  localparam int ROW0 = (64 + 256) / 8;
  localparam logic [2:0] D_PORT = 3'd1, D_FLOOD = 3'd2, D_CONTROLLER = 3'd3;

  // ------------------------------------------------------------------
  // The shared instruction memory and its versions.
  logic           cur;
  logic [E-1:0]   e_ver, e_running, e_done, e_rx_ready;
  logic [IAW:0]   e_iaddr [E];
  logic [63:0]    e_idata0 [E], e_idata1 [E];
  logic [E-1:0]   on_old;
  for (genvar e = 0; e < E; e++) begin : g_old
    // Holding a packet that runs (or ran) on the inactive version.
    assign on_old[e] = eng_busy[e] && (e_ver[e] != cur);
  end
  assign imem_cur    = cur;
  assign imem_wready = on_old == '0;
  always_ff @(posedge clk) begin
    if (rst) cur <= 1'b0;
    else if (imem_swap) cur <= !cur;
  end
  ebpf_imem_shared #(.IAW(IAW + 1), .NR(E)) u_imem (
      .clk(clk), .raddr(e_iaddr), .rdata0(e_idata0), .rdata1(e_idata1),
      .we(imem_we && imem_wready), .waddr({!cur, imem_waddr}), .wdata(imem_wdata)
  );

  // ------------------------------------------------------------------
  // Per port: the demux and the row stream.
  logic [EW-1:0]  pcur [PORTS];   // the engine taking the port's rows
  logic [RW-1:0]  prem [PORTS];   // rows still to come
  logic [RW-1:0]  ptot [PORTS];   // rows of the packet
  logic [KW-1:0]  prr [PORTS];    // the demux's next engine
  logic [PORTS-1:0] p_take, p_has;
  logic [KW-1:0]  p_pick [PORTS];
  logic [E-1:0]   fin, bud, sending;
  logic [O-1:0]   pend [E];
  logic [RW-1:0]  e_rows [E];      // rows of the engine's packet
  logic [15:0]    e_len [E];
  logic [31:0]    e_age [E];       // cycles since the handoff
  logic [E-1:0]   e_pin;           // the handoff, to the engine's FSM

  for (genvar p = 0; p < PORTS; p++) begin : g_demux
    // The first idle enabled engine from prr on.
    always_comb begin
      p_has[p] = 1'b0;
      p_pick[p] = '0;
      for (int i = ENGINES - 1; i >= 0; i--) begin
        if (eng_en[p*ENGINES+(int'(prr[p]) + i) % ENGINES]
            && !eng_busy[p*ENGINES+(int'(prr[p]) + i) % ENGINES]) begin
          p_has[p] = 1'b1;
          p_pick[p] = KW'((int'(prr[p]) + i) % ENGINES);
        end
      end
    end
    assign in_ready[p] = prem[p] == '0 && p_has[p];
    assign in_eng[p*8 +: 8] = 8'(p * ENGINES + int'(p_pick[p]));
    assign p_take[p] = in_valid[p] && in_ready[p];
    // A row goes to the running engine's stream, or, once its program is
    // done, through its host port.
    assign rx_ready[p] = prem[p] != '0 && (e_rx_ready[pcur[p]] || fin[pcur[p]]);
    always_ff @(posedge clk) begin
      if (rst) begin
        prem[p] <= '0;
        prr[p] <= '0;
        pcur[p] <= EW'(p * ENGINES);
        ptot[p] <= '0;
      end else if (p_take[p]) begin
        pcur[p] <= EW'(p * ENGINES + int'(p_pick[p]));
        prem[p] <= RW'((int'(in_len[p*16 +: 16]) + 7) / 8);
        ptot[p] <= RW'((int'(in_len[p*16 +: 16]) + 7) / 8);
        prr[p] <= KW'((int'(p_pick[p]) + 1) % ENGINES);
      end else if (rx_valid[p] && rx_ready[p]) begin
        prem[p] <= prem[p] - RW'(1);
      end
    end
  end

  // ------------------------------------------------------------------
  // Output arbiters: round-robin over the engines with a packet for the
  // output, while the output is idle.
  logic [O-1:0]   osend;            // a pass is streaming to the output
  logic [EW-1:0]  oeng [O];
  logic [EW-1:0]  orr [O];
  logic [E-1:0]   grant [O];
  logic [E-1:0]   eligible;
  logic [E-1:0]   e_rxdone;
  for (genvar e = 0; e < E; e++) begin : g_elig
    assign e_rxdone[e] = !(int'(pcur[e / ENGINES]) == e && prem[e / ENGINES] != '0);
    assign eligible[e] = fin[e] && e_rxdone[e] && !sending[e];
  end
  for (genvar o = 0; o < O; o++) begin : g_arb
    always_comb begin
      grant[o] = '0;
      if (!osend[o]) begin
        for (int i = E - 1; i >= 0; i--) begin
          if (eligible[(int'(orr[o]) + i) % E] && pend[(int'(orr[o]) + i) % E][o]) begin
            grant[o] = '0;
            grant[o][(int'(orr[o]) + i) % E] = 1'b1;
          end
        end
      end
    end
  end

  // ------------------------------------------------------------------
  // The engines.
  logic [63:0]    e_r0 [E];
  logic [2:0]     e_fault [E];
  logic [IAW-1:0] e_fault_pc [E];
  logic [63:0]    e_cycles [E], e_retired [E], e_lu [E], e_div [E], e_call [E], e_rx [E],
                  e_val [E], e_flush [E];
  logic [1:0]     e_rkind [E];
  logic [E-1:0]   e_rexcl;
  logic [7:0]     e_rmap [E];
  logic [31:0]    e_rarg [E];
  logic [2:0]     e_action [E], e_decision [E];
  logic [31:0]    e_aarg [E];
  logic [E-1:0]   e_afault;
  logic [7:0]     e_oport [E], e_omask [E];
  logic [63:0]    e_hrdata [E];
  logic [RW-1:0]  s_row [E];        // the pass's next row
  logic [O-1:0]   s_outs [E];       // the outputs of the pass
  logic [E-1:0]   e_stop;
  logic [O-1:0]   e_dest [E];
  logic           quiet;            // no packet in the switch: the host's rows
  assign quiet = eng_busy == '0;
  // The engines' calls to the shared coprocessor and their value accesses.
  logic [E-1:0]   x_req, x_ack, v_req, v_gnt, v_we;
  logic [31:0]    x_id [E], x_plo [E], x_phi [E], x_avail [E], x_wlo [E];
  logic [319:0]   x_args [E];
  logic [63:0]    x_ts [E], x_rdata [E];
  logic [31:0]    v_raddr [E], v_waddr [E];
  logic [1:0]     v_wsize [E];
  logic [63:0]    v_wdata [E];
  logic           m_bad, m_cap, m_rset, m_rexcl, m_busy;
  logic [63:0]    m_res;
  logic [1:0]     m_op, m_rkind;
  logic [15:0]    m_cycles;
  logic [7:0]     m_rmap;
  logic [31:0]    m_rarg;
  logic [XDAW-1:0] m_raddr;
  logic [EW-1:0]  m_sel;
  logic [63:0]    vm_rdata;

  for (genvar e = 0; e < E; e++) begin : g_eng
    localparam int P = e / ENGINES;
    // The engine's outputs for its packet: from its action module.
    always_comb begin
      e_dest[e] = '0;
      if (bud[e]) e_dest[e][PORTS+1] = 1'b1;
      else if (e_decision[e] == D_PORT && int'(e_oport[e]) < PORTS)
        e_dest[e][int'(e_oport[e]) % PORTS] = 1'b1;
      else if (e_decision[e] == D_FLOOD) e_dest[e][PORTS-1:0] = e_omask[e][PORTS-1:0];
      else if (e_decision[e] == D_CONTROLLER) e_dest[e][PORTS] = 1'b1;
      if (e_dest[e] == '0) e_dest[e][PORTS+1] = 1'b1;  // drops, no port, empty flood
    end
    // The data memory's host port: the pass's reads, late rows, the host.
    logic           late;
    logic [RW-1:0]  h_row;
    logic           h_we;
    logic [7:0]     h_mask;
    logic [63:0]    h_wdata;
    assign late = fin[e] && int'(pcur[P]) == e && prem[P] != '0 && rx_valid[P];
    always_comb begin
      if (sending[e]) begin
        h_row = RW'(ROW0) + s_row[e];
        h_we = 1'b0;
        h_mask = 8'h00;
        h_wdata = 64'd0;
      end else if (late) begin
        h_row = RW'(ROW0) + ptot[P] - prem[P];
        h_we = 1'b1;
        h_mask = 8'hff;
        h_wdata = rx_data[P*64 +: 64];
      end else begin
        h_row = dmem_row;
        h_we = dmem_we && quiet;
        h_mask = dmem_mask;
        h_wdata = dmem_wdata;
      end
    end
    logic rxv;
    assign rxv = rx_valid[P] && int'(pcur[P]) == e && prem[P] != '0 && !fin[e];
    logic [DAW-4:0] unused_row0;
    assign unused_row0 = '0;
    logic [IAW-1:0] unused_rpc;
    logic           unused_rv, unused_ready, unused_ivo;
    logic [191:0]   unused_ops, unused_mcyc;
    logic [7:0]     unused_lrmap, unused_lrplen;
    logic           unused_lrvalid;
    logic [63:0]    unused_lrkey;
    ebpf_top #(
        .IAW(IAW), .DAW(DAW), .NMAPS(2), .LINES(4), .KEY_BYTES(8),
        .VAL_BYTES(VAL_BYTES), .EXT_IMEM(1'b1), .SHARED_MAPS(1'b1), .MAP_LINES(LINES)
    ) u_eng (
        .clk(clk), .rst(rst), .stop(e_stop[e]),
        .imem_swap(cur != e_ver[e]), .imem_version(e_ver[e]), .imem_we(1'b0),
        .imem_waddr('0), .imem_wdata(64'd0),
        .imem_x_raddr(e_iaddr[e]), .imem_x_rdata0(e_idata0[e]), .imem_x_rdata1(e_idata1[e]),
        .dmem_row(h_row), .dmem_we(h_we), .dmem_mask(h_mask), .dmem_wdata(h_wdata),
        .dmem_rdata(e_hrdata[e]),
        .pin_valid(e_pin[e]), .pin_ready(unused_ready), .pin_len(in_len[P*16 +: 16]),
        .pin_port(8'(P)), .pin_queue(32'd0), .pin_ts(in_ts[P*64 +: 64]),
        .start(1'b0), .arg1(64'd0), .arg2(64'd0), .pkt_lo(32'd0), .pkt_hi(32'd0),
        .timestamp(64'd0), .stream(1'b0), .rx_row0(unused_row0),
        .rx_valid(rxv), .rx_data(rx_data[P*64 +: 64]), .rx_ready(e_rx_ready[e]),
        .running(e_running[e]), .done(e_done[e]), .fault(e_fault[e]),
        .fault_pc(e_fault_pc[e]), .r0(e_r0[e]),
        .retire_valid(unused_rv), .retire_pc(unused_rpc),
        .cnt_cycles(e_cycles[e]), .cnt_retired(e_retired[e]), .cnt_stall_load_use(e_lu[e]),
        .cnt_stall_div(e_div[e]), .cnt_stall_call(e_call[e]), .cnt_stall_rx(e_rx[e]),
        .cnt_stall_val(e_val[e]),
        .cnt_flush(e_flush[e]), .cnt_map_ops(unused_ops), .cnt_map_cycles(unused_mcyc),
        .redir_kind(e_rkind[e]), .redir_excl(e_rexcl[e]), .redir_map(e_rmap[e]),
        .redir_arg(e_rarg[e]),
        .act_verdicts(act_verdicts), .act_in_port(8'(P)), .act_nports(act_nports),
        .act_fault_verdict(act_fault_verdict), .act_hosts(act_hosts), .act_host_n(act_host_n),
        .act_action(e_action[e]), .act_arg(e_aarg[e]), .act_fault(e_afault[e]),
        .act_decision(e_decision[e]), .act_out_port(e_oport[e]), .act_out_mask(e_omask[e]),
        .cfg_we(1'b0), .cfg_map(8'd0), .cfg_type(3'd0), .cfg_key_size(8'd0),
        .cfg_value_size(16'd0), .cfg_base(16'd0), .cfg_n(16'd0), .cfg_trunc(1'b0),
        .line_we(1'b0), .line_idx(16'd0), .line_wvalid(1'b0), .line_wmap(8'd0),
        .line_wplen(8'd0), .line_wkey(64'd0),
        .line_rvalid(unused_lrvalid), .line_rmap(unused_lrmap), .line_rplen(unused_lrplen),
        .line_rkey(unused_lrkey),
        .x_req(x_req[e]), .x_id(x_id[e]), .x_args(x_args[e]), .x_ts(x_ts[e]),
        .x_pkt_lo(x_plo[e]), .x_pkt_hi(x_phi[e]), .x_avail(x_avail[e]), .x_win_lo(x_wlo[e]),
        .x_ack(x_ack[e]), .x_bad(m_bad), .x_cap(m_cap), .x_res(m_res), .x_op(m_op),
        .x_cycles(m_cycles), .x_redir_set(m_rset), .x_redir_kind(m_rkind),
        .x_redir_excl(m_rexcl), .x_redir_map(m_rmap), .x_redir_arg(m_rarg),
        .x_busy(m_busy && m_sel == EW'(e)), .x_raddr(m_eraddr), .x_rdata(x_rdata[e]),
        .x_we(m_we && m_wlocal && m_sel == EW'(e)), .x_waddr(m_ewaddr), .x_wsize(m_wsize),
        .x_wdata(m_wdata),
        .v_req(v_req[e]), .v_raddr(v_raddr[e]), .v_gnt(v_gnt[e]), .v_rdata(vm_rdata),
        .v_we(v_we[e]), .v_waddr(v_waddr[e]), .v_wsize(v_wsize[e]), .v_wdata(v_wdata[e])
    );
    assign e_pin[e] = p_take[P] && int'(p_pick[P]) == e - P * ENGINES;
    // The engine's state: busy from the handoff until every output has
    // had its packet; finished when its core is done (or past the budget).
    logic done_q;
    logic [O-1:0] g_any;
    always_comb begin
      g_any = '0;
      for (int o = 0; o < O; o++) g_any[o] = grant[o][e];
    end
    always_ff @(posedge clk) begin
      if (rst) begin
        eng_busy[e] <= 1'b0;
        fin[e] <= 1'b0;
        bud[e] <= 1'b0;
        sending[e] <= 1'b0;
        pend[e] <= '0;
        done_q <= 1'b0;
        e_stop[e] <= 1'b0;
        e_age[e] <= 32'd0;
      end else begin
        done_q <= e_done[e];
        e_stop[e] <= 1'b0;
        if (e_pin[e]) begin
          eng_busy[e] <= 1'b1;
          fin[e] <= 1'b0;
          bud[e] <= 1'b0;
          e_age[e] <= 32'd0;
          e_len[e] <= in_len[P*16 +: 16];
          e_rows[e] <= RW'((int'(in_len[P*16 +: 16]) + 7) / 8);
        end else if (eng_busy[e] && !fin[e]) begin
          e_age[e] <= e_age[e] + 32'd1;
          if (e_done[e] && !done_q) begin
            fin[e] <= 1'b1;
            pend[e] <= e_dest[e];
          end else if (e_age[e] >= budget) begin
            // Past the budget: stop the core, the packet is discarded.
            e_stop[e] <= 1'b1;
            fin[e] <= 1'b1;
            bud[e] <= 1'b1;
            pend[e] <= '0;
            pend[e][PORTS+1] <= 1'b1;
          end
        end
        if (g_any != '0) begin
          sending[e] <= 1'b1;
          s_outs[e] <= g_any;
          s_row[e] <= '0;
          pend[e] <= pend[e] & ~g_any;
        end else if (sending[e]) begin
          s_row[e] <= s_row[e] + RW'(1);
          if (s_row[e] + RW'(1) >= e_rows[e]) begin
            sending[e] <= 1'b0;
            if (pend[e] == '0) begin
              eng_busy[e] <= 1'b0;
              fin[e] <= 1'b0;
            end
          end
        end
      end
    end
    assign eng_fin[e] = fin[e];
  end


  // ------------------------------------------------------------------
  // The shared coprocessor and its arbiter: while none is being served,
  // the first requesting engine from m_rr on is presented (a lock call
  // only when no other engine holds that word); the coprocessor takes it
  // that cycle (`accept`) and serves it until its `ack`.
  // The value region: the lines' slots (the shared value memory), then
  // the calling engine's own copy of them (its data memory's value area:
  // its per-CPU arrays). The coprocessor's index space (XDAW bits)
  // reaches both above the engines' data memories.
  localparam int SSPAN = LINES * VAL_BYTES;
  localparam int VSPAN = 2 * SSPAN;
  localparam int VAW = $clog2(SSPAN);
  localparam int XDAW = $clog2(VSPAN) + 1 > DAW ? $clog2(VSPAN) + 1 : DAW;
  localparam int EVB = 1 << (DAW - 1);  // an engine's value area
  logic           m_own_v, m_accept, m_ack, m_has;
  logic [EW-1:0]  m_own, m_rr, m_pick;
  logic [E-1:0]   lk_v, x_elig;
  logic [31:0]    lk_addr [E];
  for (genvar e = 0; e < E; e++) begin : g_elig_x
    always_comb begin
      x_elig[e] = x_req[e];
      if (x_id[e] == 32'd93)
        for (int k = 0; k < E; k++)
          if (k != e && lk_v[k] && lk_addr[k] == x_args[e][31:0]) x_elig[e] = 1'b0;
    end
  end
  always_comb begin
    m_has = 1'b0;
    m_pick = '0;
    for (int i = E - 1; i >= 0; i--) begin
      if (x_elig[(int'(m_rr) + i) % E]) begin
        m_has = 1'b1;
        m_pick = EW'((int'(m_rr) + i) % E);
      end
    end
  end
  assign m_sel = m_own_v ? m_own : m_pick;
  logic           m_we;
  logic [XDAW-1:0] m_waddr;
  logic [1:0]     m_wsize;
  logic [63:0]    m_wdata, m_rdata;
  logic           m_rd_val_q;       // the coprocessor's last read went to the values
  logic [EW-1:0]  m_rd_eng_q;       // ... or to this engine's data memory
  assign m_rdata = m_rd_val_q ? vm_rdata : x_rdata[m_rd_eng_q];
  // Where a coprocessor index goes: the shared values, the served
  // engine's own values, or its data memory's other regions.
  function automatic logic [DAW+1:0] route(input logic [XDAW-1:0] idx);
    logic [XDAW-2:0] off;
    off = idx[XDAW-2:0];
    if (idx[XDAW-1] && int'(off) < SSPAN) route = {2'b10, DAW'(0)};
    else if (idx[XDAW-1]) route = {2'b01, DAW'(EVB) + DAW'(int'(off) - SSPAN)};
    else route = {2'b00, idx[DAW-1:0]};
  endfunction
  logic           m_rshared, m_wshared, m_rlocal, m_wlocal;
  logic [DAW-1:0] m_eraddr, m_ewaddr;
  assign {m_rshared, m_rlocal, m_eraddr} = route(m_raddr);
  assign {m_wshared, m_wlocal, m_ewaddr} = route(m_waddr);
  logic [31:0]    unused_wlo;
  ebpf_coproc #(
      .DAW(XDAW), .NMAPS(NMAPS), .LINES(LINES), .KEY_BYTES(KEY_BYTES), .VAL_BYTES(VAL_BYTES),
      .SHARED(1'b1), .VALUE_SPAN(VSPAN)
  ) u_maps (
      .clk(clk), .rst(rst), .req(m_own_v ? x_req[m_own] : m_has), .id(x_id[m_sel]),
      .arg1(x_args[m_sel][63:0]), .arg2(x_args[m_sel][127:64]), .arg3(x_args[m_sel][191:128]),
      .arg4(x_args[m_sel][255:192]), .arg5(x_args[m_sel][319:256]),
      .timestamp(x_ts[m_sel]), .pkt_lo(x_plo[m_sel]), .pkt_hi(x_phi[m_sel]),
      .pkt_avail(x_avail[m_sel]), .win_lo_in(x_wlo[m_sel]), .accept(m_accept),
      .ack(m_ack), .bad(m_bad), .cap(m_cap), .result(m_res),
      .busy(m_busy), .mem_raddr(m_raddr), .mem_rdata(m_rdata), .mem_we(m_we),
      .mem_waddr(m_waddr), .mem_wsize(m_wsize), .mem_wdata(m_wdata),
      .op_kind(m_op), .op_cycles(m_cycles), .redir_kind(m_rkind), .redir_excl(m_rexcl),
      .redir_map(m_rmap), .redir_arg(m_rarg), .redir_set(m_rset), .win_lo(unused_wlo),
      .cfg_we(cfg_we && quiet), .cfg_map(cfg_map), .cfg_type(cfg_type),
      .cfg_key_size(cfg_key_size), .cfg_value_size(cfg_value_size), .cfg_base(cfg_base),
      .cfg_n(cfg_n), .cfg_trunc(cfg_trunc),
      .line_we(line_we && quiet), .line_idx(line_idx), .line_wvalid(line_wvalid),
      .line_wmap(line_wmap), .line_wplen(line_wplen), .line_wkey(line_wkey),
      .line_rvalid(line_rvalid), .line_rmap(line_rmap), .line_rplen(line_rplen),
      .line_rkey(line_rkey)
  );
  for (genvar e = 0; e < E; e++) begin : g_xack
    assign x_ack[e] = m_ack && m_own_v && m_own == EW'(e);
  end
  always_ff @(posedge clk) begin
    m_rd_val_q <= m_rshared;
    m_rd_eng_q <= m_sel;
    if (rst) begin
      m_own_v <= 1'b0;
      m_rr <= '0;
      lk_v <= '0;
    end else begin
      if (m_accept) begin
        m_own_v <= 1'b1;
        m_own <= m_pick;
        m_rr <= EW'((int'(m_pick) + 1) % E);
      end else if (m_ack) begin
        m_own_v <= 1'b0;
      end
      for (int e = 0; e < E; e++) begin
        if (!e_running[e]) lk_v[e] <= 1'b0;
      end
      if (m_ack && m_own_v && !m_bad) begin
        if (x_id[m_own] == 32'd93) begin
          lk_v[m_own] <= 1'b1;
          lk_addr[m_own] <= x_args[m_own][31:0];
        end else if (x_id[m_own] == 32'd94) begin
          lk_v[m_own] <= 1'b0;
        end
      end
    end
  end

  // The value memory: the granted core's read, the previous grant's
  // write from its MEM stage (or the coprocessor's, which works alone),
  // the host's rows while the switch is empty.
  logic           v_has;
  logic [EW-1:0]  v_rr, v_pick, v_wsel;
  always_comb begin
    v_has = 1'b0;
    v_pick = '0;
    for (int i = E - 1; i >= 0; i--) begin
      if (v_req[(int'(v_rr) + i) % E]) begin
        v_has = 1'b1;
        v_pick = EW'((int'(v_rr) + i) % E);
      end
    end
    v_wsel = '0;
    for (int k = 0; k < E; k++) if (v_we[k]) v_wsel = EW'(k);
  end
  for (genvar e = 0; e < E; e++) begin : g_vgnt
    assign v_gnt[e] = v_has && !m_busy && v_pick == EW'(e);
  end
  always_ff @(posedge clk) begin
    if (rst) v_rr <= '0;
    else if (v_has && !m_busy) v_rr <= EW'((int'(v_pick) + 1) % E);
  end
  logic           vm_host;
  assign vm_host = quiet && !m_busy;
  ebpf_dmem #(.DAW(VAW)) u_values (
      .clk(clk),
      .raddr(m_busy ? m_raddr[VAW-1:0] : v_raddr[v_pick][VAW-1:0]),
      .rdata(vm_rdata),
      .waddr(m_we ? m_waddr[VAW-1:0] : v_waddr[v_wsel][VAW-1:0]),
      .wsize(m_we ? m_wsize : v_wsize[v_wsel]),
      .we((m_we && m_wshared) || v_we != '0),
      .wdata(m_we ? m_wdata : v_wdata[v_wsel]),
      .host_sel(vm_host), .host_row(vmem_row[VAW-4:0]), .host_we(vmem_we && quiet),
      .host_mask(dmem_mask), .host_wdata(dmem_wdata), .host_rdata(vmem_rdata)
  );

  // ------------------------------------------------------------------
  // The crossbar: each output streams the rows of the engine it granted,
  // a cycle after their read.
  logic [O-1:0]  ov_q, ofirst_q, olast_q;
  logic [EW-1:0] oeng_q [O];
  for (genvar o = 0; o < O; o++) begin : g_out
    logic [EW-1:0] gi;
    always_comb begin
      gi = '0;
      for (int k = 0; k < E; k++) if (grant[o][k]) gi = EW'(k);
    end
    always_ff @(posedge clk) begin
      if (rst) begin
        osend[o] <= 1'b0;
        orr[o] <= '0;
        ov_q[o] <= 1'b0;
      end else begin
        ov_q[o] <= osend[o];
        oeng_q[o] <= oeng[o];
        ofirst_q[o] <= osend[o] && s_row[oeng[o]] == '0;
        olast_q[o] <= osend[o] && s_row[oeng[o]] + RW'(1) >= e_rows[oeng[o]];
        if (grant[o] != '0) begin
          osend[o] <= 1'b1;
          oeng[o] <= gi;
          orr[o] <= EW'((int'(gi) + 1) % E);
        end else if (osend[o] && s_row[oeng[o]] + RW'(1) >= e_rows[oeng[o]]) begin
          osend[o] <= 1'b0;
        end
      end
    end
    assign out_valid[o] = ov_q[o];
    assign out_first[o] = ofirst_q[o];
    assign out_last[o] = olast_q[o];
    assign out_eng[o*8 +: 8] = 8'(oeng_q[o]);
    assign out_data[o*64 +: 64] = e_hrdata[oeng_q[o]];
  end

  // ------------------------------------------------------------------
  // The host's view of one engine.
  logic [EW-1:0] se;
  assign se = EW'(sel_eng);
  assign dmem_rdata = e_hrdata[se];
  assign sel_r0 = e_r0[se];
  assign sel_fault = e_fault[se];
  assign sel_fault_pc = e_fault_pc[se];
  assign sel_budget = bud[se];
  assign sel_version = e_ver[se];
  assign sel_len = e_len[se];
  assign sel_dest = pend[se];  // read as the run finishes
  assign sel_cycles = e_cycles[se];
  assign sel_retired = e_retired[se];
  assign sel_stall_load_use = e_lu[se];
  assign sel_stall_div = e_div[se];
  assign sel_stall_call = e_call[se];
  assign sel_stall_rx = e_rx[se];
  assign sel_stall_val = e_val[se];
  assign sel_flush = e_flush[se];
  assign sel_redirect = {14'd0, e_rkind[se], e_rexcl[se], 7'd0, e_rmap[se], e_rarg[se]};
  assign sel_action = {e_oport[se], 7'd0, e_afault[se], 5'd0, e_decision[se], 5'd0,
                       e_action[se]};
  assign sel_action_arg = e_aarg[se];
  assign sel_action_mask = {24'd0, e_omask[se]};
endmodule

// The instruction memory shared by the engines: 8-byte slots in even and
// odd banks (as ebpf_imem), one write port (the host) and NR read ports,
// each giving slots `raddr` and `raddr + 1` a cycle later. (A device
// replicates the banks per pair of read ports; the simulation holds one
// copy.)
module ebpf_imem_shared #(
    parameter int IAW = 13,
    parameter int NR = 16
) (
    input  logic           clk,
    input  logic [IAW-1:0] raddr [NR],
    output logic [63:0]    rdata0 [NR],
    output logic [63:0]    rdata1 [NR],
    input  logic           we,
    input  logic [IAW-1:0] waddr,
    input  logic [63:0]    wdata
);
  localparam int ROWS = 1 << (IAW - 1);
  logic [63:0] even [ROWS];
  logic [63:0] odd  [ROWS];
  always_ff @(posedge clk) begin
    if (we && !waddr[0]) even[waddr[IAW-1:1]] <= wdata;
    if (we && waddr[0]) odd[waddr[IAW-1:1]] <= wdata;
  end
  for (genvar r = 0; r < NR; r++) begin : g_rd
    logic [IAW-1:0] a1;
    logic [63:0]    even_q, odd_q;
    logic           odd_first;
    assign a1 = raddr[r] + IAW'(1);
    always_ff @(posedge clk) begin
      even_q <= even[a1[IAW-1:1]];
      odd_q <= odd[raddr[r][IAW-1:1]];
      odd_first <= raddr[r][0];
    end
    assign rdata0[r] = odd_first ? odd_q : even_q;
    assign rdata1[r] = odd_first ? even_q : odd_q;
  end
endmodule
