// One eBPF engine as the host drives it: the core, its double-buffered
// instruction memory (two versions: the core runs the active one while the
// host writes the other, even during a run; `imem_swap` at `start` makes
// the written one active, so a swap falls between packets and every packet
// runs wholly on one version), its data memory (metadata, packet,
// stack, map values; host port for the packet in and out and the values),
// the coprocessor with its maps (host port for their configuration and
// lines), and the performance counters (cycles, retired instructions,
// stall cycles by cause, taken-branch flushes, map operations and their
// cycles), cleared by `start`.
module ebpf_top
#(
    parameter int IAW = 12,
    parameter int DAW = 17,
    parameter int NMAPS = 8,
    parameter int LINES = 4,  // the simulated model: 1024 (build.rs)
    parameter int KEY_BYTES = 16,
    parameter int VAL_BYTES = 64,
    // What bpf_get_smp_processor_id answers (the switch numbers its engines).
    parameter logic [63:0] ENGINE_ID = 64'd0,
    // 1: no instruction memory of its own; the fetch goes out through
    // imem_x_* to one shared by several engines (ebpf_switch).
    parameter bit EXT_IMEM = 1'b0,
    // 1: the maps are not the engine's own (ebpf_switch): map calls
    // (lookup, update, delete, bpf_redirect_map, spin lock and unlock) go
    // out through x_* to one coprocessor shared by the engines, which
    // reads their keys through this engine's data memory (x_raddr while
    // `x_busy`), and the core's value accesses through v_* to the shared
    // value memory; the other helpers stay on the engine's coprocessor.
    parameter bit SHARED_MAPS = 1'b0,
    // With SHARED_MAPS: the shared coprocessor's lines. The core's value
    // window is their slots (the shared value memory) and then as many
    // of its own (this data memory's value area: the per-CPU arrays).
    parameter int MAP_LINES = LINES
) (
    input  logic           clk,
    input  logic           rst,
    input  logic           stop,          // abandon a run (the versions stay)
    // Host: instruction memory (writes go to the inactive version).
    input  logic           imem_swap,     // with `start`: run the other version
    output logic           imem_version,  // the version the core runs
    input  logic           imem_we,
    input  logic [IAW-1:0] imem_waddr,
    input  logic [63:0]    imem_wdata,
    // With EXT_IMEM: the fetch address ({version, slot}) and the two slots
    // read at it a cycle later.
    output logic [IAW:0]   imem_x_raddr,
    input  logic [63:0]    imem_x_rdata0,
    input  logic [63:0]    imem_x_rdata1,
    // Host: data memory rows.
    input  logic [DAW-4:0] dmem_row,
    input  logic           dmem_we,
    input  logic [7:0]     dmem_mask,
    input  logic [63:0]    dmem_wdata,
    output logic [63:0]    dmem_rdata,
    // The port side (the engine FSM): `pin_valid` offers a packet of
    // `pin_len` bytes from port index `pin_port` (receive queue
    // `pin_queue`) captured at `pin_ts`. While idle (`pin_ready`) the FSM
    // takes it, writes the metadata (xdp_md: data, data_end, data_meta,
    // ingress_ifindex = port + 1, rx_queue_index; then the timestamp and
    // the length) into the data memory one row a cycle, and starts the
    // core on it (XDP context, the kernel's headroom) with the packet
    // streaming in through rx_*; the action module answers for it once
    // `done`.
    input  logic           pin_valid,
    output logic           pin_ready,
    input  logic [15:0]    pin_len,
    input  logic [7:0]     pin_port,
    input  logic [31:0]    pin_queue,
    input  logic [63:0]    pin_ts,
    // Run control (the host's way in: the FSM's inputs are unused then).
    input  logic           start,
    input  logic [63:0]    arg1,
    input  logic [63:0]    arg2,
    input  logic [31:0]    pkt_lo,
    input  logic [31:0]    pkt_hi,
    input  logic [63:0]    timestamp,
    // Packet stream: with `stream` set at `start`, the packet arrives as
    // 8-byte rows from data memory row `rx_row0` on, one per accepted
    // cycle (`rx_valid && rx_ready`), while the program runs; without it
    // the host has written the packet before `start`.
    input  logic           stream,
    input  logic [DAW-4:0] rx_row0,
    input  logic           rx_valid,
    input  logic [63:0]    rx_data,
    output logic           rx_ready,
    output logic           running,
    output logic           done,
    output logic [2:0]     fault,
    output logic [IAW-1:0] fault_pc,
    output logic [63:0]    r0,
    // Retired-instruction trace.
    output logic           retire_valid,
    output logic [IAW-1:0] retire_pc,
    // Performance counters.
    output logic [63:0]    cnt_cycles,
    output logic [63:0]    cnt_retired,
    output logic [63:0]    cnt_stall_load_use,
    output logic [63:0]    cnt_stall_div,
    output logic [63:0]    cnt_stall_call,
    output logic [63:0]    cnt_stall_rx,
    output logic [63:0]    cnt_stall_val,
    output logic [63:0]    cnt_flush,
    // Map operations and their cycles, 64 bits each: lookup, update, delete
    // from bit 0 up.
    output logic [191:0]   cnt_map_ops,
    output logic [191:0]   cnt_map_cycles,
    // The redirect the run set (the action module's input): kind 0 none,
    // 1 bpf_redirect's port, 2 a devmap entry, 3 a devmap broadcast.
    output logic [1:0]     redir_kind,
    output logic           redir_excl,
    output logic [7:0]     redir_map,
    output logic [31:0]    redir_arg,
    // The action module (ebpf_action): its settings (the software
    // switch's: r0 a verdict or an XDP code, the ingress port index, the
    // ports, the fault action, up to four host queues' ports, a byte
    // each) and its answer for the finished run.
    input  logic           act_verdicts,
    input  logic [7:0]     act_in_port,
    input  logic [7:0]     act_nports,
    input  logic [63:0]    act_fault_verdict,
    input  logic [31:0]    act_hosts,
    input  logic [7:0]     act_host_n,
    output logic [2:0]     act_action,
    output logic [31:0]    act_arg,
    output logic           act_fault,
    output logic [2:0]     act_decision,
    output logic [7:0]     act_out_port,
    output logic [7:0]     act_out_mask,
    // Host: map configuration and lines (between runs).
    input  logic           cfg_we,
    input  logic [7:0]     cfg_map,
    input  logic [2:0]     cfg_type,
    input  logic [7:0]     cfg_key_size,
    input  logic [15:0]    cfg_value_size,
    input  logic [15:0]    cfg_base,
    input  logic [15:0]    cfg_n,
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
    output logic [KEY_BYTES*8-1:0] line_rkey,
    // With SHARED_MAPS: the call to the shared coprocessor (held until
    // `x_ack`) with what it needs of the engine, its answer, and its
    // reads of this engine's data memory.
    output logic           x_req,
    output logic [31:0]    x_id,
    output logic [319:0]   x_args,      // r1..r5, 64 bits each from bit 0
    output logic [63:0]    x_ts,
    output logic [31:0]    x_pkt_lo,
    output logic [31:0]    x_pkt_hi,
    output logic [31:0]    x_avail,
    output logic [31:0]    x_win_lo,
    input  logic           x_ack,
    input  logic           x_bad,
    input  logic           x_cap,
    input  logic [63:0]    x_res,
    input  logic [1:0]     x_op,
    input  logic [15:0]    x_cycles,
    input  logic           x_redir_set,
    input  logic [1:0]     x_redir_kind,
    input  logic           x_redir_excl,
    input  logic [7:0]     x_redir_map,
    input  logic [31:0]    x_redir_arg,
    input  logic           x_busy,
    input  logic [DAW-1:0] x_raddr,
    output logic [63:0]    x_rdata,
    // ... and its writes of this engine's per-CPU values (while it
    // serves this engine).
    input  logic           x_we,
    input  logic [DAW-1:0] x_waddr,
    input  logic [1:0]     x_wsize,
    input  logic [63:0]    x_wdata,
    // With SHARED_MAPS: the core's port to the shared value memory.
    output logic           v_req,
    output logic [31:0]    v_raddr,
    input  logic           v_gnt,
    input  logic [63:0]    v_rdata,
    output logic           v_we,
    output logic [31:0]    v_waddr,
    output logic [1:0]     v_wsize,
    output logic [63:0]    v_wdata
);
  `include "ebpf_defs.svh"
  localparam int HEADROOM = 256;  // the kernel's XDP headroom, as the VM's
  // ------------------------------------------------------------------
  // The engine FSM: idle -> metadata rows -> run -> done (idle again).
  typedef enum logic [1:0] {F_IDLE, F_META, F_RUN} fsm_t;
  fsm_t           f_st;
  logic [2:0]     f_row;
  logic           f_mode;  // the run was started by the FSM
  logic [31:0]    f_lo, f_hi, f_queue;
  logic [7:0]     f_port;
  logic [15:0]    f_len;
  logic [63:0]    f_ts;
  logic           f_go;    // start the core this cycle
  logic           f_we;
  logic [63:0]    f_row_data;
  assign pin_ready = f_st == F_IDLE && !running;
  assign f_go      = f_st == F_META && f_row == 3'd7;
  assign f_we      = f_st == F_META;
  always_comb begin
    unique case (f_row)
      3'd0:    f_row_data = {f_hi, f_lo};                        // data, data_end
      3'd1:    f_row_data = {24'd0, f_port + 8'd1, f_lo};        // data_meta, ingress_ifindex
      3'd2:    f_row_data = {32'd0, f_queue};                    // rx_queue_index, egress 0
      3'd4:    f_row_data = f_ts;                                // timestamp
      3'd5:    f_row_data = {48'd0, f_len};                      // length
      default: f_row_data = 64'd0;
    endcase
  end
  always_ff @(posedge clk) begin
    if (rst || stop) begin
      f_st <= F_IDLE;
      f_mode <= 1'b0;
      f_row <= 3'd0;
    end else begin
      if (start) f_mode <= 1'b0;  // the host's run
      unique case (f_st)
        F_IDLE: if (pin_valid && !running && !start) begin
          f_st <= F_META;
          f_row <= 3'd0;
          f_lo <= 32'(HEADROOM);
          f_hi <= 32'(HEADROOM) + {16'd0, pin_len};
          f_len <= pin_len;
          f_port <= pin_port;
          f_queue <= pin_queue;
          f_ts <= pin_ts;
        end
        F_META: begin
          f_row <= f_row + 3'd1;
          if (f_row == 3'd7) begin
            f_st <= F_RUN;
            f_mode <= 1'b1;
          end
        end
        F_RUN: if (done) f_st <= F_IDLE;
        default: f_st <= F_IDLE;
      endcase
    end
  end
  // The run's inputs: the host's, or the FSM's for its packet.
  logic           start_i, stream_i;
  logic [63:0]    arg1_i, arg2_i, timestamp_i;
  logic [31:0]    pkt_lo_i, pkt_hi_i;
  logic [DAW-4:0] rx_row0_i;
  logic           f_cur;  // the FSM's values apply (its start edge or its run)
  assign f_cur       = f_go || (f_mode && !start);
  assign start_i     = start || f_go;
  assign stream_i    = f_go ? 1'b1 : stream;
  assign arg1_i      = f_cur ? {REGION_META, 32'd0} : arg1;
  assign arg2_i      = f_cur ? 64'd0 : arg2;
  assign pkt_lo_i    = f_cur ? f_lo : pkt_lo;
  assign pkt_hi_i    = f_cur ? f_hi : pkt_hi;
  assign timestamp_i = f_cur ? f_ts : timestamp;
  assign rx_row0_i   = f_go ? (DAW-3)'((META_BYTES + HEADROOM) / 8) : rx_row0;
  // The metadata rows go in through the data memory's host port.
  logic [DAW-4:0] h_row;
  logic           h_we;
  logic [7:0]     h_mask;
  logic [63:0]    h_wdata;
  assign h_row   = f_we ? (DAW-3)'(f_row) : dmem_row;
  assign h_we    = f_we || dmem_we;
  assign h_mask  = f_we ? 8'hff : dmem_mask;
  assign h_wdata = f_we ? f_row_data : dmem_wdata;
  logic [IAW-1:0] i_addr;
  logic [63:0]    i_data0, i_data1;
  // The active version flips at a start (the host's or the FSM's) with `imem_swap`; the fetch of
  // slot 0 at that same edge already reads the new version.
  logic act, fetch_ver;
  assign fetch_ver    = (start_i && imem_swap) ? !act : act;
  assign imem_version = act;
  always_ff @(posedge clk) begin
    if (rst) act <= 1'b0;
    else if (start_i && imem_swap) act <= !act;
  end

  assign imem_x_raddr = {fetch_ver, i_addr};
  if (EXT_IMEM) begin : g_ext_imem
    assign i_data0 = imem_x_rdata0;
    assign i_data1 = imem_x_rdata1;
    logic unused_w;
    assign unused_w = ^{imem_we, imem_waddr, imem_wdata};
  end else begin : g_imem
    logic unused_x;
    assign unused_x = ^{imem_x_rdata0, imem_x_rdata1};
    ebpf_imem #(.IAW(IAW + 1)) u_imem (
        .clk(clk), .raddr({fetch_ver, i_addr}), .rdata0(i_data0), .rdata1(i_data1),
        .we(imem_we), .waddr({!fetch_ver, imem_waddr}), .wdata(imem_wdata)
    );
  end

  logic [DAW-1:0] d_raddr, d_waddr;
  logic [1:0]     d_size;
  logic           d_we;
  logic [63:0]    d_wdata, d_rdata;
  // The stream shares the data memory's write port with MEM's stores,
  // which go first; rows land from rx_row0_i on (the host's rx_row0 or the FSM's).
  logic           streaming, rx_take;
  logic [DAW-4:0] rx_row;
  logic [31:0]    rx_bytes;
  // The coprocessor owns the data memory's ports while it serves a map
  // call (the core is waiting in EXE then, its MEM stage empty).
  logic           c_busy, c_we;
  logic [DAW-1:0] c_raddr, c_waddr;
  logic [1:0]     c_wsize;
  logic [63:0]    c_wdata;
  logic [DAW-1:0] core_raddr;
  assign d_raddr  = c_busy ? c_raddr : (SHARED_MAPS && x_busy) ? x_raddr : core_raddr;
  assign x_rdata  = d_rdata;
  logic xw;
  assign xw       = SHARED_MAPS && x_we;
  assign rx_ready = running && streaming && !d_we && !c_we && !xw;
  assign rx_take  = rx_valid && rx_ready;
  always_ff @(posedge clk) begin
    if (rst || start_i) begin
      streaming <= start_i && stream_i;
      rx_row <= rx_row0_i;
      rx_bytes <= 32'd0;
    end else if (rx_take) begin
      rx_row <= rx_row + (DAW-3)'(1);
      rx_bytes <= rx_bytes + 32'd8;
    end
  end

  logic           m_we;
  logic [DAW-1:0] m_waddr;
  logic [1:0]     m_size;
  logic [63:0]    m_wdata;
  assign m_we    = d_we || c_we || xw || rx_take;
  assign m_waddr = d_we ? d_waddr : c_we ? c_waddr : xw ? x_waddr : {rx_row, 3'd0};
  assign m_size  = d_we ? d_size : c_we ? c_wsize : xw ? x_wsize : 2'd3;
  assign m_wdata = d_we ? d_wdata : c_we ? c_wdata : xw ? x_wdata : rx_data;

  ebpf_dmem #(.DAW(DAW)) u_dmem (
      .clk(clk), .raddr(d_raddr), .rdata(d_rdata), .waddr(m_waddr), .wsize(m_size), .we(m_we),
      .wdata(m_wdata), .host_sel(!running), .host_row(h_row), .host_we(h_we),
      .host_mask(h_mask), .host_wdata(h_wdata), .host_rdata(dmem_rdata)
  );

  // The core's call, the engine's coprocessor (l_*) and the shared one
  // (x_*): a call is answered by the one it went to.
  logic        c_req, c_ack, c_bad, c_cap, l_ack, l_bad, l_cap, l_accept, l_redir_set;
  logic [31:0] c_id;
  logic [63:0] c_a1, c_a2, c_a3, c_a4, c_a5, c_res, l_res;
  logic [1:0]  c_op, l_op;
  logic [15:0] c_cycles, l_cycles;
  logic [1:0]  c_op_i;
  logic        c_shared;
  assign c_op_i   = c_op - 2'd1;
  assign c_shared = SHARED_MAPS && (c_id == 32'd1 || c_id == 32'd2 || c_id == 32'd3
                                    || c_id == 32'd51 || c_id == 32'd93 || c_id == 32'd94);
  assign x_req    = c_req && c_shared;
  assign x_id     = c_id;
  assign x_args   = {c_a5, c_a4, c_a3, c_a2, c_a1};
  assign x_ts     = timestamp_i;
  assign x_pkt_lo = pkt_lo_i;
  assign x_pkt_hi = pkt_hi_i;
  assign x_avail  = pkt_avail;
  assign x_win_lo = win_lo;
  logic x_ack_i;
  assign x_ack_i  = SHARED_MAPS && x_ack;
  assign c_ack    = l_ack || x_ack_i;
  assign c_bad    = x_ack_i ? x_bad : l_bad;
  assign c_cap    = x_ack_i ? x_cap : l_cap;
  assign c_res    = x_ack_i ? x_res : l_res;
  assign c_op     = x_ack_i ? x_op : l_op;
  assign c_cycles = x_ack_i ? x_cycles : l_cycles;
  logic [1:0]  l_rkind;
  logic        l_rexcl;
  logic [7:0]  l_rmap;
  logic [31:0] l_rarg;
  logic [31:0] pkt_avail, win_lo;
  assign pkt_avail = streaming ? pkt_lo_i + rx_bytes : pkt_hi_i;
  ebpf_coproc #(
      .ENGINE_ID(ENGINE_ID), .DAW(DAW), .NMAPS(NMAPS), .LINES(LINES), .KEY_BYTES(KEY_BYTES), .VAL_BYTES(VAL_BYTES)
  ) u_cop (
      .clk(clk), .rst(rst || stop || start_i), .req(c_req && !c_shared), .id(c_id),
      .arg1(c_a1), .arg2(c_a2), .arg3(c_a3), .arg4(c_a4), .arg5(c_a5),
      .timestamp(timestamp_i), .pkt_lo(pkt_lo_i), .pkt_hi(pkt_hi_i), .pkt_avail(pkt_avail),
      .win_lo_in(32'd0), .accept(l_accept),
      .ack(l_ack), .bad(l_bad), .cap(l_cap), .result(l_res),
      .busy(c_busy), .mem_raddr(c_raddr), .mem_rdata(d_rdata), .mem_we(c_we),
      .mem_waddr(c_waddr), .mem_wsize(c_wsize), .mem_wdata(c_wdata),
      .op_kind(l_op), .op_cycles(l_cycles), .redir_kind(l_rkind), .redir_excl(l_rexcl),
      .redir_map(l_rmap), .redir_arg(l_rarg), .redir_set(l_redir_set), .win_lo(win_lo),
      .cfg_we(cfg_we), .cfg_map(cfg_map), .cfg_type(cfg_type), .cfg_key_size(cfg_key_size),
      .cfg_value_size(cfg_value_size), .cfg_base(cfg_base), .cfg_n(cfg_n),
      .cfg_trunc(cfg_trunc),
      .line_we(line_we), .line_idx(line_idx), .line_wvalid(line_wvalid), .line_wmap(line_wmap),
      .line_wplen(line_wplen), .line_wkey(line_wkey), .line_rvalid(line_rvalid),
      .line_rmap(line_rmap), .line_rplen(line_rplen), .line_rkey(line_rkey)
  );

  // The run's redirect: the engine's coprocessor's, or with SHARED_MAPS
  // the last one either coprocessor set.
  if (SHARED_MAPS) begin : g_redir
    always_ff @(posedge clk) begin
      if (rst || stop || start_i) begin
        redir_kind <= 2'd0;
        redir_excl <= 1'b0;
        redir_map <= 8'd0;
        redir_arg <= 32'd0;
      end else if (l_ack && l_redir_set) begin
        redir_kind <= l_rkind;
        redir_excl <= l_rexcl;
        redir_map <= l_rmap;
        redir_arg <= l_rarg;
      end else if (x_ack && x_redir_set) begin
        redir_kind <= x_redir_kind;
        redir_excl <= x_redir_excl;
        redir_map <= x_redir_map;
        redir_arg <= x_redir_arg;
      end
    end
  end else begin : g_redir_own
    assign redir_kind = l_rkind;
    assign redir_excl = l_rexcl;
    assign redir_map  = l_rmap;
    assign redir_arg  = l_rarg;
    logic unused_x;
    assign unused_x = ^{x_ack, x_bad, x_cap, x_res, x_op, x_cycles, x_redir_set, x_redir_kind,
                       x_redir_excl, x_redir_map, x_redir_arg, x_busy, x_raddr, v_gnt, v_rdata,
                       l_redir_set, x_we, x_waddr, x_wsize, x_wdata};
  end
  logic unused_acc;
  assign unused_acc = l_accept;

  logic ev_lu, ev_div, ev_call, ev_rx, ev_val, ev_flush;
  ebpf_core #(
      .IAW(IAW), .DAW(DAW), .VALUE_SPAN((SHARED_MAPS ? 2 * MAP_LINES : LINES) * VAL_BYTES),
      .EXT_VAL(SHARED_MAPS), .SHARED_SPAN((SHARED_MAPS ? MAP_LINES : LINES) * VAL_BYTES)
  ) u_core (
      .clk(clk), .rst(rst || stop), .start(start_i), .arg1(arg1_i), .arg2(arg2_i),
      .pkt_lo(win_lo), .pkt_hi(pkt_hi_i), .pkt_avail(pkt_avail),
      .running(running), .done(done), .fault(fault), .fault_pc(fault_pc), .r0(r0),
      .imem_raddr(i_addr), .imem_data0(i_data0), .imem_data1(i_data1),
      .dmem_raddr(core_raddr), .dmem_addr(d_waddr), .dmem_size(d_size), .dmem_we(d_we), .dmem_wdata(d_wdata),
      .dmem_rdata(d_rdata),
      .val_req(v_req), .val_raddr(v_raddr), .val_gnt(v_gnt), .val_rdata(v_rdata),
      .val_we(v_we), .val_waddr(v_waddr), .val_wsize(v_wsize), .val_wdata(v_wdata),
      .cop_req(c_req), .cop_id(c_id), .cop_arg1(c_a1), .cop_arg2(c_a2), .cop_arg3(c_a3),
      .cop_arg4(c_a4), .cop_arg5(c_a5), .cop_ack(c_ack), .cop_bad(c_bad), .cop_cap(c_cap),
      .cop_result(c_res),
      .retire_valid(retire_valid), .retire_pc(retire_pc),
      .ev_stall_load_use(ev_lu), .ev_stall_div(ev_div), .ev_stall_call(ev_call),
      .ev_stall_rx(ev_rx), .ev_stall_val(ev_val),
      .ev_flush(ev_flush)
  );

  always_ff @(posedge clk) begin
    if (rst || start_i) begin
      cnt_cycles <= 64'd0;
      cnt_retired <= 64'd0;
      cnt_stall_load_use <= 64'd0;
      cnt_stall_div <= 64'd0;
      cnt_stall_call <= 64'd0;
      cnt_stall_rx <= 64'd0;
      cnt_stall_val <= 64'd0;
      cnt_flush <= 64'd0;
      for (int k = 0; k < 3; k++) begin
        cnt_map_ops[k*64 +: 64] <= 64'd0;
        cnt_map_cycles[k*64 +: 64] <= 64'd0;
      end
    end else if (running) begin
      cnt_cycles <= cnt_cycles + 64'd1;
      if (retire_valid) cnt_retired <= cnt_retired + 64'd1;
      if (ev_lu) cnt_stall_load_use <= cnt_stall_load_use + 64'd1;
      if (ev_div) cnt_stall_div <= cnt_stall_div + 64'd1;
      if (ev_call) cnt_stall_call <= cnt_stall_call + 64'd1;
      if (ev_rx) cnt_stall_rx <= cnt_stall_rx + 64'd1;
      if (ev_val) cnt_stall_val <= cnt_stall_val + 64'd1;
      if (ev_flush) cnt_flush <= cnt_flush + 64'd1;
      if (c_ack && c_op != 2'd0) begin
        cnt_map_ops[c_op_i*64 +: 64] <= cnt_map_ops[c_op_i*64 +: 64] + 64'd1;
        cnt_map_cycles[c_op_i*64 +: 64] <= cnt_map_cycles[c_op_i*64 +: 64] + 64'(c_cycles);
      end
    end
  end
  ebpf_action #(.PORTS(8), .HOSTS(4)) u_action (
      .verdict_mode(act_verdicts), .r0(r0), .faulted(fault != FAULT_NONE),
      .redir_kind(redir_kind), .redir_excl(redir_excl), .redir_arg(redir_arg),
      .in_port(f_mode ? f_port : act_in_port), .nports(act_nports), .fault_verdict(act_fault_verdict),
      .hosts(act_hosts), .host_n(act_host_n), .action(act_action), .arg(act_arg),
      .counted(act_fault), .decision(act_decision), .out_port(act_out_port),
      .out_mask(act_out_mask)
  );
endmodule
