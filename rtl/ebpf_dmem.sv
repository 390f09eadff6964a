// Data memory: metadata, packet and stack in one byte-addressed space,
// built as eight byte-wide banks (bank j holds the bytes whose address is
// j mod 8), each a simple dual-port RAM with a synchronous read (block RAM
// on an FPGA), so the core reads or writes any width (1, 2, 4, 8 bytes) at
// any alignment in one access.
//
// The read address comes from EXE (`raddr`, the load's computed address)
// and is taken at the clock edge that moves the load to MEM, where `rdata`
// holds the bytes; the write port is MEM's (a store). A store in MEM and a
// load in EXE touching the same bank row at the same edge: the load gets
// the stored byte (bypass). Between runs (`host_sel`), the host owns both
// ports: 8-byte rows, written with a byte mask, read one edge after the
// row is presented.
module ebpf_dmem #(
    parameter int DAW = 13
) (
    input  logic           clk,
    // Core: read (address at the EXE -> MEM edge), write (MEM).
    input  logic [DAW-1:0] raddr,
    output logic [63:0]    rdata,
    input  logic [DAW-1:0] waddr,
    input  logic [1:0]     wsize,
    input  logic           we,
    input  logic [63:0]    wdata,
    // Host: row = byte address / 8.
    input  logic           host_sel,
    input  logic [DAW-4:0] host_row,
    input  logic           host_we,
    input  logic [7:0]     host_mask,
    input  logic [63:0]    host_wdata,
    output logic [63:0]    host_rdata
);
  `include "ebpf_defs.svh"
  localparam int ROWS = 1 << (DAW - 3);

  logic [3:0] nbytes;
  always_comb begin
    unique case (wsize)
      SZ_B:    nbytes = 4'd1;
      SZ_H:    nbytes = 4'd2;
      SZ_W:    nbytes = 4'd4;
      default: nbytes = 4'd8;
    endcase
  end

  logic [2:0] raddr_lo_q;
  always_ff @(posedge clk) raddr_lo_q <= raddr[2:0];

  logic [7:0] bank_out [8];

  // Bank j holds byte lane k = (j - addr) mod 8 of an access, at the row
  // of addr + k: one row further when the access wraps past bank 7.
  for (genvar j = 0; j < 8; j++) begin : g_bank
    logic [7:0]     mem [ROWS];
    logic [DAW-4:0] rrow, wrow;
    logic [DAW-1:0] rsum, wsum;  // addr + 7 - j: its row is bank j's row
    logic [2:0]     wlane;
    logic           wen;
    logic [7:0]     wbyte, q, byp_d;
    logic           byp_v;

    assign wlane = 3'(j) - waddr[2:0];
    assign rsum  = raddr + DAW'(7 - j);
    assign wsum  = waddr + DAW'(7 - j);
    always_comb begin
      if (host_sel) begin
        rrow  = host_row;
        wrow  = host_row;
        wen   = host_we && host_mask[j];
        wbyte = host_wdata[j*8 +: 8];
      end else begin
        rrow  = rsum[DAW-1:3];
        wrow  = wsum[DAW-1:3];
        wen   = we && {1'b0, wlane} < nbytes;
        wbyte = wdata[wlane*8 +: 8];
      end
    end

    always_ff @(posedge clk) begin
      if (wen) mem[wrow] <= wbyte;
      q     <= mem[rrow];
      byp_v <= wen && wrow == rrow;
      byp_d <= wbyte;
    end
    assign bank_out[j] = byp_v ? byp_d : q;
    logic unused;
    assign unused = ^{rsum[2:0], wsum[2:0]};
    assign host_rdata[j*8 +: 8] = bank_out[j];
  end

  // Byte k of the access is in bank (addr + k) mod 8.
  always_comb begin
    for (int k = 0; k < 8; k++) rdata[k*8 +: 8] = bank_out[3'(raddr_lo_q + 3'(k))];
  end
endmodule
