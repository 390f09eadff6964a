// The eBPF processor: a 5-stage pipeline IF/ID/EXE/MEM/WB.
//
// * IF computes the next pc (sequential: predict not-taken; a branch
//   target from EXE; held on a stall) and presents it to the instruction
//   memory, a synchronous RAM whose output is the IF/ID instruction
//   register; each access gives two slots, so `lddw` is fetched at once.
// * ID decodes, reads the register file (written by WB in the same cycle:
//   write-through), and holds the hazard unit: a load followed by a user
//   of its destination stalls one cycle (load-use), and so does a `call`
//   right after a load of one of r1-r5 (a call takes its arguments in
//   EXE through the forwarding network, without draining).
// * EXE has the forwarding muxes (EX/MEM -> EXE, "EX->EX"; MEM/WB -> EXE,
//   "MEM->EX"), the ALU, the multi-cycle divider and the coprocessor
//   handshake (both stall IF/ID/EXE while busy), computes and checks data
//   addresses (the data memory takes a load's address at the EXE -> MEM
//   edge), and resolves conditional branches: a taken one redirects IF in
//   the same cycle and flushes the instruction in ID (one bubble) when
//   the prediction made in ID was wrong. `exit` and faults flush the same
//   way and stop fetching. `ja` and `gotol` redirect IF from ID instead
//   (no bubble), and so does a conditional jump the branch history table
//   predicts taken (no bubble when it is).
// * A load or store of packet bytes that have not arrived yet waits in
//   EXE (the packet streams into the data memory while the program runs).
// * MEM reads or writes the data memory (any width, any alignment); loads
//   of xdp_md's packet pointers from the metadata get the packet region.
//   Atomics (add/or/and/xor, their fetch forms, xchg, cmpxchg on 4 or 8
//   aligned bytes) read like a load at the EXE -> MEM edge and write the
//   new value in MEM (read-modify-write in one cycle, the data memory's
//   bypass serving a following access); a fetch is a load for the hazard
//   unit, and cmpxchg takes r0 through the forwarding network.
// * WB writes the register file, retires (pc on `retire_pc`) and ends
//   the run at `exit` or at a faulting instruction.
module ebpf_core
#(
    parameter int IAW = 12,   // instruction memory: 2**IAW slots
    parameter int DAW = 17,   // data memory: 2**DAW bytes (values in the upper half)
    parameter int VALUE_SPAN = 65536,  // bytes of map value slots
    // 1: map values live outside the engine (the switch's shared value
    // memory, ebpf_switch): a value access asks for the value port in
    // EXE (`val_req`) and waits there until granted (`val_gnt`, at most
    // one engine a cycle); the memory takes the granted address at that
    // edge like the data memory, its bytes come back in MEM
    // (`val_rdata`), and a store or atomic writes them from MEM through
    // `val_we`, the cycle after the grant.
    parameter bit EXT_VAL = 1'b0,
    // With EXT_VAL: value offsets from SHARED_SPAN on are the engine's
    // own (its per-CPU arrays), in its data memory's value area at
    // offset - SHARED_SPAN, without asking for the shared port.
    parameter int SHARED_SPAN = VALUE_SPAN
) (
    input  logic           clk,
    input  logic           rst,
    // Run control: `start` resets the pipeline, sets r1/r2 and r10 and runs
    // from slot 0. The packet window is [pkt_lo, pkt_hi) of region 4.
    input  logic           start,
    input  logic [63:0]    arg1,
    input  logic [63:0]    arg2,
    input  logic [31:0]    pkt_lo,
    input  logic [31:0]    pkt_hi,
    // End of the packet bytes received so far (the packet streams in while
    // the program runs): a packet access beyond it waits in EXE.
    input  logic [31:0]    pkt_avail,
    output logic           running,
    output logic           done,
    output logic [2:0]     fault,
    output logic [IAW-1:0] fault_pc,
    output logic [63:0]    r0,
    // Instruction memory: the address taken at the clock edge, then the
    // slots at it and after it.
    output logic [IAW-1:0] imem_raddr,
    input  logic [63:0]    imem_data0,
    input  logic [63:0]    imem_data1,
    // Data memory: read address from EXE, write port and read data in MEM.
    output logic [DAW-1:0] dmem_raddr,
    output logic [DAW-1:0] dmem_addr,
    output logic [1:0]     dmem_size,
    output logic           dmem_we,
    output logic [63:0]    dmem_wdata,
    input  logic [63:0]    dmem_rdata,
    // With EXT_VAL: the shared value memory (byte offsets in the value
    // region; unused otherwise).
    output logic           val_req,
    output logic [31:0]    val_raddr,
    input  logic           val_gnt,
    input  logic [63:0]    val_rdata,
    output logic           val_we,
    output logic [31:0]    val_waddr,
    output logic [1:0]     val_wsize,
    output logic [63:0]    val_wdata,
    // Coprocessor: `cop_req` is held until `cop_ack`.
    output logic           cop_req,
    output logic [31:0]    cop_id,
    output logic [63:0]    cop_arg1,
    output logic [63:0]    cop_arg2,
    output logic [63:0]    cop_arg3,
    output logic [63:0]    cop_arg4,
    output logic [63:0]    cop_arg5,
    input  logic           cop_ack,
    input  logic           cop_bad,
    input  logic           cop_cap,
    input  logic [63:0]    cop_result,
    // Per-cycle events for the performance counters and the trace.
    output logic           retire_valid,
    output logic [IAW-1:0] retire_pc,
    output logic           ev_stall_load_use,
    output logic           ev_stall_div,
    output logic           ev_stall_call,
    output logic           ev_stall_rx,
    output logic           ev_stall_val,   // waiting for the shared value port
    output logic           ev_flush
);
  `include "ebpf_defs.svh"
  // Data memory layout (byte indices).
  localparam int STACK_BASE = 8192 - STACK_BYTES;
  localparam int PKT_BASE   = META_BYTES;
  localparam int VALUE_BASE = 1 << (DAW - 1);
  localparam logic [63:0] FRAME_POINTER = {REGION_STACK, 32'd512};

  // ------------------------------------------------------------------
  // Register file: r0-r10, written by WB, read by ID with write-through.
  logic [63:0] regs [0:10];

  // ------------------------------------------------------------------
  // Pipeline registers.
  // IF/ID: the instruction memory's output is its instruction.
  logic           ifid_v;
  logic [IAW-1:0] ifid_pc;
  logic [63:0]    ifid_insn;
  logic [31:0]    ifid_imm_hi;
  assign ifid_insn   = imem_data0;
  assign ifid_imm_hi = imem_data1[63:32];

  logic           idex_v;
  logic [IAW-1:0] idex_pc;
  logic [7:0]     idex_opc;
  logic [3:0]     idex_dst, idex_src;
  logic [15:0]    idex_off;
  logic [31:0]    idex_imm, idex_imm_hi;
  logic [63:0]    idex_a, idex_b;  // dst and src register values read in ID
  logic           idex_we;
  logic           idex_is_alu, idex_is_div, idex_is_ldx, idex_is_st, idex_is_stx;
  logic           idex_is_jcond, idex_is_ja, idex_is_gotol, idex_is_exit, idex_is_call;
  logic           idex_is_lddw, idex_illegal;
  logic           idex_is_atomic, idex_loads;  // idex_loads: result from MEM
  logic           idex_pred;   // a conditional jump predicted taken in ID
  logic [1:0]     idex_bht;    // its history counter, as read in ID
  logic [3:0]     idex_rd;

  logic           exmem_v;
  logic [IAW-1:0] exmem_pc;
  logic           exmem_we;
  logic [3:0]     exmem_rd;
  logic [63:0]    exmem_result;
  logic           exmem_load, exmem_store, exmem_sx;
  logic [1:0]     exmem_size;
  logic [DAW-1:0] exmem_addr;
  logic [63:0]    exmem_wdata;
  logic [2:0]     exmem_fault;
  logic           exmem_exit;
  logic           exmem_ctx_ptr;
  logic           exmem_atomic;
  logic [3:0]     exmem_aop;   // the atomic's imm[7:4]
  logic [63:0]    exmem_cmp;   // cmpxchg: r0
  logic           exmem_val;   // EXT_VAL: the access went to the value memory
  logic [31:0]    exmem_voff;  // its offset there

  logic           memwb_v;
  logic [IAW-1:0] memwb_pc;
  logic           memwb_we;
  logic [3:0]     memwb_rd;
  logic [63:0]    memwb_result;
  logic [2:0]     memwb_fault;
  logic           memwb_exit;

  logic           halting;  // an exit or fault passed EXE: fetch no more

  // ------------------------------------------------------------------
  // Branch history table: a 2-bit saturating counter per instruction slot
  // (taken when >= 2), read at the fetch address like the instruction
  // memory (so its counter arrives in ID with the instruction) and written
  // by EXE when a conditional jump resolves. It only steers fetch: a wrong
  // guess costs the bubble every taken jump cost before, never a result.
  // Not reset by `start`: it keeps what earlier packets taught it.
  logic [1:0] bht [0:(1<<IAW)-1];
  logic [1:0] bht_q;  // the counter of the slot in IF/ID
  initial begin
    for (int i = 0; i < (1 << IAW); i++) bht[i] = 2'b01;
  end

  // ------------------------------------------------------------------
  // ID: decode.
  logic [7:0]  id_opc;
  logic [2:0]  id_cls;
  logic [3:0]  id_op;
  logic [2:0]  id_mode;
  logic [3:0]  id_dst, id_src;
  logic        id_x;
  logic        id_alu_cls, id_jmp_cls;
  logic        id_is_alu, id_is_div, id_is_ldx, id_is_st, id_is_stx, id_is_jcond;
  logic        id_is_ja, id_is_gotol, id_is_exit, id_is_call, id_is_lddw, id_illegal;
  logic        id_reads_a, id_reads_b, id_we;
  logic        id_is_atomic, id_is_cmpxchg, id_loads;
  logic [3:0]  id_rd;
  logic [31:0] id_imm;

  assign id_opc  = ifid_insn[7:0];
  assign id_cls  = id_opc[2:0];
  assign id_op   = id_opc[7:4];
  assign id_x    = id_opc[3];
  assign id_mode = id_opc[7:5];
  assign id_dst  = ifid_insn[11:8];
  assign id_src  = ifid_insn[15:12];
  assign id_imm  = ifid_insn[63:32];

  always_comb begin
    id_alu_cls  = (id_cls == CLS_ALU) || (id_cls == CLS_ALU64);
    id_jmp_cls  = (id_cls == CLS_JMP) || (id_cls == CLS_JMP32);
    id_is_div   = id_alu_cls && (id_op == ALU_DIV || id_op == ALU_MOD);
    id_is_alu   = id_alu_cls && !id_is_div && id_op <= ALU_END;
    id_is_ldx   = (id_cls == CLS_LDX) && (id_mode == MODE_MEM || id_mode == MODE_MEMSX);
    id_is_st    = (id_cls == CLS_ST) && (id_mode == MODE_MEM);
    id_is_stx   = (id_cls == CLS_STX) && (id_mode == MODE_MEM);
    id_is_lddw  = (id_opc == 8'h18);
    id_is_atomic = (id_cls == CLS_STX) && (id_mode == MODE_ATOMIC)
                   && (id_opc[4:3] == SZ_W || id_opc[4:3] == SZ_DW)
                   && (id_imm == ATOMIC_ADD || id_imm == ATOMIC_OR || id_imm == ATOMIC_AND
                       || id_imm == ATOMIC_XOR || id_imm == (ATOMIC_ADD | ATOMIC_FETCH)
                       || id_imm == (ATOMIC_OR | ATOMIC_FETCH)
                       || id_imm == (ATOMIC_AND | ATOMIC_FETCH)
                       || id_imm == (ATOMIC_XOR | ATOMIC_FETCH)
                       || id_imm == ATOMIC_XCHG || id_imm == ATOMIC_CMPXCHG);
    id_is_cmpxchg = id_is_atomic && id_imm == ATOMIC_CMPXCHG;
    id_is_ja    = (id_cls == CLS_JMP) && (id_op == JMP_JA) && !id_x;
    id_is_gotol = (id_cls == CLS_JMP32) && (id_op == JMP_JA) && !id_x;
    id_is_exit  = (id_cls == CLS_JMP) && (id_op == JMP_EXIT);
    id_is_call  = (id_cls == CLS_JMP) && (id_op == JMP_CALL) && !id_x;
    id_is_jcond = id_jmp_cls && id_op != JMP_JA && id_op != JMP_CALL && id_op != JMP_EXIT
                  && id_op <= JMP_JSLE;
    id_illegal  = !(id_is_alu || id_is_div || id_is_ldx || id_is_st || id_is_stx || id_is_lddw
                    || id_is_ja || id_is_gotol || id_is_exit || id_is_call || id_is_jcond
                    || id_is_atomic)
                  || id_dst > 4'd10 || id_src > 4'd10
                  || ((id_is_alu || id_is_div || id_is_ldx || id_is_lddw) && id_dst == 4'd10)
                  || (id_is_atomic && id_imm[0] && !id_is_cmpxchg && id_src == 4'd10);
    // Which register values EXE uses (the hazard unit's inputs).
    id_reads_a  = ((id_is_alu || id_is_div) && id_op != ALU_MOV) || id_is_st || id_is_stx
                  || id_is_jcond || id_is_atomic;
    id_reads_b  = ((id_is_alu || id_is_div || id_is_jcond) && id_x) || id_is_ldx || id_is_stx
                  || id_is_atomic;
    id_we       = id_is_alu || id_is_div || id_is_ldx || id_is_lddw || id_is_call
                  || (id_is_atomic && id_imm[0]);
    // The register written: an atomic fetch writes src, cmpxchg and call r0.
    id_rd       = (id_is_call || id_is_cmpxchg) ? 4'd0 : (id_is_atomic ? id_src : id_dst);
    id_loads    = id_is_ldx || (id_is_atomic && id_imm[0]);
  end

  // Register reads with write-through from WB.
  logic        wb_write;
  logic [63:0] id_a, id_b;
  assign wb_write = memwb_v && memwb_we && memwb_fault == FAULT_NONE;
  always_comb begin
    id_a = (id_dst <= 4'd10) ? regs[id_dst] : 64'd0;
    id_b = (id_src <= 4'd10) ? regs[id_src] : 64'd0;
    if (wb_write && memwb_rd == id_dst) id_a = memwb_result;
    if (wb_write && memwb_rd == id_src) id_b = memwb_result;
  end

  // Hazard unit.
  logic id_load_use, id_stall;
  // A call reads r1-r5 and cmpxchg r0 in EXE through the forwarding
  // network, so only a load still in EXE that writes one of them holds
  // them back (a load-use stall like any other).
  logic id_call_use;
  assign id_call_use = (id_is_call && idex_rd >= 4'd1 && idex_rd <= 4'd5)
                       || (id_is_cmpxchg && idex_rd == 4'd0);
  assign id_load_use = ifid_v && idex_v && idex_loads &&
                       ((id_reads_a && idex_rd == id_dst) || (id_reads_b && idex_rd == id_src)
                        || id_call_use);
  assign id_stall = id_load_use;

  // ------------------------------------------------------------------
  // EXE.
  logic [2:0]  ex_cls;
  logic [3:0]  ex_op;
  logic        ex_x, ex_is64;
  logic [1:0]  ex_size;
  logic [63:0] ex_a, ex_b, ex_opnd_b, ex_imm_sx;
  assign ex_cls    = idex_opc[2:0];
  assign ex_op     = idex_opc[7:4];
  assign ex_x      = idex_opc[3];
  assign ex_size   = idex_opc[4:3];
  assign ex_is64   = (ex_cls == CLS_ALU64) || (ex_cls == CLS_JMP);
  assign ex_imm_sx = {{32{idex_imm[31]}}, idex_imm};

  // Forwarding: EX/MEM first (the younger), then MEM/WB, else ID's read.
  // WB writes the register file at the end of the cycle, so MEM/WB also
  // forwards to the call's arguments, which EXE takes from the file.
  function automatic logic [63:0] fwd(input logic [3:0] r, input logic [63:0] v);
    fwd = v;
    if (memwb_v && memwb_we && memwb_rd == r) fwd = memwb_result;
    if (exmem_v && exmem_we && exmem_rd == r) fwd = exmem_result;
  endfunction
  assign ex_a = fwd(idex_dst, idex_a);
  assign ex_b = fwd(idex_src, idex_b);
  assign ex_opnd_b = ex_x ? ex_b : ex_imm_sx;

  logic [63:0] alu_y;
  ebpf_alu u_alu (
      .op(ex_op), .is64(ex_is64), .src_x(ex_x), .off(idex_off), .imm(idex_imm),
      .a(ex_a), .b(ex_opnd_b), .y(alu_y)
  );

  logic        div_start, div_ack, div_busy, div_done;
  logic [63:0] div_y;
  ebpf_div u_div (
      .clk(clk), .rst(rst || start), .start(div_start), .ack(div_ack),
      .is64(ex_is64), .is_mod(ex_op == ALU_MOD), .signed_op(idex_off == 16'd1),
      .a(ex_a), .b(ex_opnd_b), .busy(div_busy), .done(div_done), .y(div_y)
  );

  // Branch condition.
  logic        taken_cond;
  logic [63:0] ca, cb;
  always_comb begin
    ca = ex_is64 ? ex_a : {{32{ex_a[31]}}, ex_a[31:0]};
    cb = ex_is64 ? ex_opnd_b : {{32{ex_opnd_b[31]}}, ex_opnd_b[31:0]};
    // Unsigned compares of 32-bit operands: the sign extension above keeps
    // their order only for signed compares, so zero-extend for those.
    unique case (ex_op)
      JMP_JEQ:  taken_cond = ca == cb;
      JMP_JNE:  taken_cond = ca != cb;
      JMP_JSET: taken_cond = (ca & cb) != 64'd0;
      JMP_JGT:  taken_cond = ex_is64 ? (ex_a > ex_opnd_b) : (ex_a[31:0] > ex_opnd_b[31:0]);
      JMP_JGE:  taken_cond = ex_is64 ? (ex_a >= ex_opnd_b) : (ex_a[31:0] >= ex_opnd_b[31:0]);
      JMP_JLT:  taken_cond = ex_is64 ? (ex_a < ex_opnd_b) : (ex_a[31:0] < ex_opnd_b[31:0]);
      JMP_JLE:  taken_cond = ex_is64 ? (ex_a <= ex_opnd_b) : (ex_a[31:0] <= ex_opnd_b[31:0]);
      JMP_JSGT: taken_cond = $signed(ca) > $signed(cb);
      JMP_JSGE: taken_cond = $signed(ca) >= $signed(cb);
      JMP_JSLT: taken_cond = $signed(ca) < $signed(cb);
      JMP_JSLE: taken_cond = $signed(ca) <= $signed(cb);
      default:  taken_cond = 1'b0;
    endcase
  end

  // `ja` and `gotol` were taken in ID (below); here only conditions. A
  // conditional jump whose outcome differs from ID's prediction redirects
  // fetch to the target (taken) or to the next slot (not taken).
  logic           ex_taken, ex_mispredict;
  logic [IAW-1:0] ex_target;
  logic [31:0]    ex_rel;
  assign ex_taken      = idex_is_jcond && taken_cond;
  assign ex_mispredict = idex_is_jcond && (taken_cond != idex_pred);
  assign ex_rel        = {{16{idex_off[15]}}, idex_off};
  assign ex_target     = idex_pc + IAW'(1) + (taken_cond ? ex_rel[IAW-1:0] : IAW'(0));

  // Unconditional jumps redirect IF from ID: the target is fetched at
  // the edge that would have fetched the next slot, so they cost no
  // bubble (they still pass down the pipeline and retire).
  logic           id_jump;
  logic [31:0]    id_rel;
  logic [IAW-1:0] id_target;
  logic           id_pred;
  assign id_pred   = id_is_jcond && bht_q[1];
  assign id_jump   = ifid_v && (id_is_ja || id_is_gotol || id_pred);
  assign id_rel    = id_is_gotol ? id_imm : {{16{ifid_insn[31]}}, ifid_insn[31:16]};
  assign id_target = ifid_pc + IAW'(1) + id_rel[IAW-1:0];

  // Data address: base + off, checked against the region's window.
  logic [63:0]    ex_addr;
  logic [31:0]    ex_region, ex_aoff;
  logic [32:0]    ex_end;
  logic [3:0]     ex_bytes;
  logic           ex_mem_op, ex_in_pkt, ex_in_stack, ex_in_meta, ex_in_val;
  logic [DAW-1:0] ex_index;
  always_comb begin
    ex_mem_op = idex_is_ldx || idex_is_st || idex_is_stx || idex_is_atomic;
    ex_addr   = (idex_is_ldx ? ex_b : ex_a) + {{48{idex_off[15]}}, idex_off};
    ex_region = ex_addr[63:32];
    ex_aoff   = ex_addr[31:0];
    unique case (ex_size)
      SZ_B:    ex_bytes = 4'd1;
      SZ_H:    ex_bytes = 4'd2;
      SZ_W:    ex_bytes = 4'd4;
      default: ex_bytes = 4'd8;
    endcase
    ex_end      = {1'b0, ex_aoff} + {29'd0, ex_bytes};
    ex_in_pkt   = ex_region == REGION_PACKET && ex_aoff >= pkt_lo && ex_end <= {1'b0, pkt_hi};
    ex_in_stack = ex_region == REGION_STACK && ex_end <= 33'(STACK_BYTES);
    ex_in_meta  = ex_region == REGION_META && ex_end <= 33'(META_BYTES);
    ex_in_val   = ex_region == REGION_VALUE && ex_end <= 33'(VALUE_SPAN);
    if (ex_in_pkt) ex_index = DAW'(PKT_BASE) + ex_aoff[DAW-1:0];
    else if (ex_in_stack) ex_index = DAW'(STACK_BASE) + ex_aoff[DAW-1:0];
    else if (ex_in_val && EXT_VAL && ex_aoff >= 32'(SHARED_SPAN))
      ex_index = DAW'(VALUE_BASE) + DAW'(ex_aoff - 32'(SHARED_SPAN));
    else if (ex_in_val) ex_index = DAW'(VALUE_BASE) + ex_aoff[DAW-1:0];
    else ex_index = ex_aoff[DAW-1:0];
  end

  // Context conversion: a 4-byte load of xdp_md's data, data_end or
  // data_meta (metadata offsets 0, 4, 8, each holding a packet offset)
  // gives the full packet pointer, as the kernel's rewrite of those loads.
  logic ex_ctx_ptr;
  assign ex_ctx_ptr = idex_is_ldx && ex_in_meta && ex_size == SZ_W && ex_aoff[31:4] == 28'd0
                      && ex_aoff[1:0] == 2'd0 && ex_aoff[3:2] != 2'd3;

  logic [2:0] ex_fault;
  always_comb begin
    ex_fault = FAULT_NONE;
    if (idex_illegal) ex_fault = FAULT_ILLEGAL;
    else if (ex_mem_op && !(ex_in_pkt || ex_in_stack || ex_in_meta || ex_in_val))
      ex_fault = FAULT_MEM;
    else if (idex_is_atomic && (ex_aoff[2:0] & (ex_bytes[2:0] - 3'd1)) != 3'd0)
      ex_fault = FAULT_MEM;  // atomics: aligned only
    else if (idex_is_call && cop_ack && cop_bad) ex_fault = cop_cap ? FAULT_CAPACITY : FAULT_HELPER;
  end

  // A packet access to bytes not yet received waits (the fault check
  // uses the whole packet's window, known from the start).
  logic ex_wait_rx;
  assign ex_wait_rx = ex_mem_op && ex_in_pkt && ex_end > {1'b0, pkt_avail};

  // A value access outside the engine waits for its grant.
  logic ex_ext_val;
  assign ex_ext_val = EXT_VAL && idex_v && ex_mem_op && ex_in_val && ex_fault == FAULT_NONE
                      && ex_aoff < 32'(SHARED_SPAN);
  assign val_req    = ex_ext_val;
  assign val_raddr  = ex_aoff;

  logic ex_busy, ex_flush, ex_stop;
  assign ex_busy  = idex_v && ((idex_is_div && !div_done) || (idex_is_call && !cop_ack)
                               || ex_wait_rx || (ex_ext_val && !val_gnt));
  assign ex_stop  = idex_v && !ex_busy && (idex_is_exit || ex_fault != FAULT_NONE);
  assign ex_flush = idex_v && !ex_busy && (ex_mispredict || ex_stop);
  assign div_start = idex_v && idex_is_div && !div_busy && !div_done;
  assign div_ack   = idex_v && idex_is_div && div_done;

  assign cop_req  = idex_v && idex_is_call;
  assign cop_id   = idex_imm;
  // The arguments from the forwarding network: a call does not wait for
  // the older instructions to write back.
  assign cop_arg1 = fwd(4'd1, regs[1]);
  assign cop_arg2 = fwd(4'd2, regs[2]);
  assign cop_arg3 = fwd(4'd3, regs[3]);
  assign cop_arg4 = fwd(4'd4, regs[4]);
  assign cop_arg5 = fwd(4'd5, regs[5]);

  logic [63:0] ex_result;
  always_comb begin
    if (idex_is_div) ex_result = div_y;
    else if (idex_is_lddw) ex_result = {idex_imm_hi, idex_imm};
    else if (idex_is_call) ex_result = cop_result;
    else ex_result = alu_y;
  end

  // ------------------------------------------------------------------
  // MEM.
  assign dmem_addr  = exmem_addr;
  assign dmem_size  = exmem_size;

  logic [63:0] mem_rd, mem_load;
  assign mem_rd = (EXT_VAL && exmem_val) ? val_rdata : dmem_rdata;
  always_comb begin
    unique case (exmem_size)
      SZ_B:    mem_load = exmem_sx ? {{56{mem_rd[7]}}, mem_rd[7:0]} : {56'd0, mem_rd[7:0]};
      SZ_H:    mem_load = exmem_sx ? {{48{mem_rd[15]}}, mem_rd[15:0]} : {48'd0, mem_rd[15:0]};
      SZ_W:    mem_load = exmem_sx ? {{32{mem_rd[31]}}, mem_rd[31:0]} : {32'd0, mem_rd[31:0]};
      default: mem_load = mem_rd;
    endcase
  end

  // An atomic's new value from the old one (mem_load) and src; the write
  // keeps the access's width. cmpxchg writes the old value back on a
  // mismatch.
  logic [63:0] mem_new;
  logic        mem_cmp_eq;
  assign mem_cmp_eq = exmem_size == SZ_W ? mem_load[31:0] == exmem_cmp[31:0]
                                         : mem_load == exmem_cmp;
  always_comb begin
    unique case (exmem_aop)
      ATOMIC_ADD[7:4]:     mem_new = mem_load + exmem_wdata;
      ATOMIC_OR[7:4]:      mem_new = mem_load | exmem_wdata;
      ATOMIC_AND[7:4]:     mem_new = mem_load & exmem_wdata;
      ATOMIC_XOR[7:4]:     mem_new = mem_load ^ exmem_wdata;
      ATOMIC_XCHG[7:4]:    mem_new = exmem_wdata;
      ATOMIC_CMPXCHG[7:4]: mem_new = mem_cmp_eq ? exmem_wdata : mem_load;
      default:             mem_new = mem_load;
    endcase
  end

  logic mem_writes;
  assign mem_writes = exmem_v && (exmem_store || exmem_atomic) && exmem_fault == FAULT_NONE;
  assign dmem_we    = mem_writes && !(EXT_VAL && exmem_val);
  assign dmem_wdata = exmem_atomic ? mem_new : exmem_wdata;
  assign val_we     = mem_writes && EXT_VAL && exmem_val;
  assign val_waddr  = exmem_voff;
  assign val_wsize  = exmem_size;
  assign val_wdata  = dmem_wdata;

  // ------------------------------------------------------------------
  // WB and outputs.
  assign retire_valid = memwb_v && memwb_fault == FAULT_NONE;
  assign retire_pc    = memwb_pc;
  assign r0           = regs[0];

  assign ev_flush          = running && ex_flush && ex_mispredict;
  assign ev_stall_div      = running && ex_busy && idex_is_div;
  assign ev_stall_rx       = running && ex_busy && ex_wait_rx;
  assign ev_stall_call     = running && ex_busy && idex_is_call;
  assign ev_stall_val      = running && ex_busy && ex_ext_val && !val_gnt;
  assign ev_stall_load_use = running && !ex_busy && !ex_flush && id_load_use;

  // IF: the next pc, presented to the instruction memory at the edge.
  logic [IAW-1:0] npc;
  always_comb begin
    if (rst || start) npc = '0;
    else if (!running) npc = ifid_pc;
    else if (ex_flush && !ex_stop) npc = ex_target;
    else if (ex_flush || ex_busy || id_stall) npc = ifid_pc;
    else if (id_jump) npc = id_target;
    else npc = ifid_pc + ((ifid_insn[7:0] == 8'h18) ? IAW'(2) : IAW'(1));
  end
  assign imem_raddr = npc;

  // The history table: read at the fetch address, updated by a resolved
  // conditional jump (counting up when taken, down when not).
  always_ff @(posedge clk) begin
    bht_q <= bht[npc];
    if (running && idex_v && idex_is_jcond && !ex_busy)
      bht[idex_pc] <= ex_taken ? (idex_bht == 2'b11 ? 2'b11 : idex_bht + 2'b01)
                               : (idex_bht == 2'b00 ? 2'b00 : idex_bht - 2'b01);
  end
  assign dmem_raddr = ex_index;

  always_ff @(posedge clk) begin
    if (rst || start) begin
      ifid_v <= start && !rst;  // slot 0 is being fetched
      ifid_pc <= '0;
      idex_v <= 1'b0;
      exmem_v <= 1'b0;
      memwb_v <= 1'b0;
      halting <= 1'b0;
      running <= start && !rst;
      done <= 1'b0;
      fault <= FAULT_NONE;
      fault_pc <= '0;
      for (int i = 0; i <= 10; i++) regs[i] <= 64'd0;
      regs[1] <= arg1;
      regs[2] <= arg2;
      regs[10] <= FRAME_POINTER;
    end else if (running) begin
      // WB.
      if (memwb_v) begin
        if (memwb_fault != FAULT_NONE) begin
          running <= 1'b0;
          done <= 1'b1;
          fault <= memwb_fault;
          fault_pc <= memwb_pc;
        end else begin
          if (memwb_we) regs[memwb_rd] <= memwb_result;
          if (memwb_exit) begin
            running <= 1'b0;
            done <= 1'b1;
          end
        end
      end

      // MEM -> WB.
      memwb_v      <= exmem_v;
      memwb_pc     <= exmem_pc;
      memwb_we     <= exmem_we;
      memwb_rd     <= exmem_rd;
      memwb_result <= exmem_load ? (mem_load | (exmem_ctx_ptr ? {REGION_PACKET, 32'd0} : 64'd0))
                                 : exmem_result;
      memwb_fault  <= exmem_fault;
      memwb_exit   <= exmem_exit;

      // EXE -> MEM (a bubble while EXE is busy).
      exmem_v      <= idex_v && !ex_busy;
      exmem_pc     <= idex_pc;
      exmem_we     <= idex_we && ex_fault == FAULT_NONE;
      exmem_rd     <= idex_rd;
      exmem_result <= ex_result;
      exmem_load   <= idex_loads;
      exmem_store  <= idex_is_st || idex_is_stx;
      exmem_atomic <= idex_is_atomic;
      exmem_aop    <= idex_imm[7:4];
      exmem_cmp    <= fwd(4'd0, regs[0]);
      exmem_sx     <= idex_opc[7:5] == MODE_MEMSX;
      exmem_size   <= ex_size;
      exmem_addr   <= ex_index;
      exmem_wdata  <= idex_is_st ? ex_imm_sx : ex_b;
      exmem_fault  <= ex_fault;
      exmem_exit   <= idex_is_exit;
      exmem_ctx_ptr <= ex_ctx_ptr;
      exmem_val    <= ex_ext_val;
      exmem_voff   <= ex_aoff;

      // ID -> EXE.
      if (ex_flush) begin
        idex_v <= 1'b0;
      end else if (!ex_busy) begin
        idex_v        <= ifid_v && !id_stall;
        idex_pc       <= ifid_pc;
        idex_opc      <= id_opc;
        idex_dst      <= id_dst;
        idex_src      <= id_src;
        idex_off      <= ifid_insn[31:16];
        idex_imm      <= ifid_insn[63:32];
        idex_imm_hi   <= ifid_imm_hi;
        idex_a        <= id_a;
        idex_b        <= id_b;
        idex_we       <= id_we;
        idex_is_alu   <= id_is_alu;
        idex_is_div   <= id_is_div;
        idex_is_ldx   <= id_is_ldx;
        idex_is_st    <= id_is_st;
        idex_is_stx   <= id_is_stx;
        idex_is_jcond <= id_is_jcond;
        idex_is_ja    <= id_is_ja;
        idex_is_gotol <= id_is_gotol;
        idex_is_exit  <= id_is_exit;
        idex_is_call  <= id_is_call;
        idex_is_lddw  <= id_is_lddw;
        idex_illegal  <= id_illegal;
        idex_is_atomic <= id_is_atomic;
        idex_loads    <= id_loads;
        idex_pred     <= id_pred;
        idex_bht      <= bht_q;
        idex_rd       <= id_rd;
      end else begin
        // Waiting in EXE: keep the forwarded operands, as their producers
        // move on and out of the forwarding network meanwhile.
        idex_a <= ex_a;
        idex_b <= ex_b;
      end

      // IF -> ID.
      if (ex_flush) begin
        ifid_v <= !ex_stop;
        ifid_pc <= npc;
        if (ex_stop) halting <= 1'b1;
      end else if (!ex_busy && !id_stall) begin
        ifid_v <= !halting;
        ifid_pc <= npc;
      end
    end
  end

  // Fields some instructions leave unused.
  logic unused;
  assign unused = ^{idex_is_alu, idex_is_ja, idex_is_gotol, ex_addr[63:32],
                   imem_data1[31:0], ex_rel[31:IAW], id_rel[31:IAW]};
endmodule
