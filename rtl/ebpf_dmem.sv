// Data memory: metadata, packet and stack in one byte-addressed array,
// built as eight byte-wide banks so that the core reads or writes any
// width (1, 2, 4, 8 bytes) at any alignment in one cycle. The host port
// reads and writes aligned 8-byte rows (with a byte mask) between runs.
module ebpf_dmem
#(
    parameter int DAW = 13
) (
    input  logic           clk,
    // Core port (MEM stage): asynchronous read, write at the clock edge.
    input  logic [DAW-1:0] addr,
    input  logic [1:0]     size,
    input  logic           we,
    input  logic [63:0]    wdata,
    output logic [63:0]    rdata,
    // Host port: row = byte address / 8.
    input  logic [DAW-4:0] host_row,
    input  logic           host_we,
    input  logic [7:0]     host_mask,
    input  logic [63:0]    host_wdata,
    output logic [63:0]    host_rdata
);
  `include "ebpf_defs.svh"
  localparam int ROWS = 1 << (DAW - 3);

  logic [7:0] bank [0:7][0:ROWS-1];

  logic [3:0] nbytes;
  always_comb begin
    unique case (size)
      SZ_B:    nbytes = 4'd1;
      SZ_H:    nbytes = 4'd2;
      SZ_W:    nbytes = 4'd4;
      default: nbytes = 4'd8;
    endcase
  end

  // Bank j holds byte lane k = (j - addr) mod 8 of the access, at the row
  // of addr + k: one row further when the access wraps past bank 7.
  logic [2:0]     lane [0:7];
  logic [DAW-4:0] row  [0:7];
  always_comb begin
    for (int j = 0; j < 8; j++) begin
      lane[j] = 3'(j) - addr[2:0];
      row[j]  = addr[DAW-1:3] + ((3'(j) < addr[2:0]) ? (DAW-3)'(1) : (DAW-3)'(0));
    end
  end

  always_comb begin
    rdata = 64'd0;
    for (int j = 0; j < 8; j++) rdata[lane[j]*8 +: 8] = bank[j][row[j]];
  end

  always_ff @(posedge clk) begin
    for (int j = 0; j < 8; j++) begin
      if (we && {1'b0, lane[j]} < nbytes) bank[j][row[j]] <= wdata[lane[j]*8 +: 8];
      else if (host_we && host_mask[j]) bank[j][host_row] <= host_wdata[j*8 +: 8];
    end
  end

  always_comb begin
    for (int j = 0; j < 8; j++) host_rdata[j*8 +: 8] = bank[j][host_row];
  end
endmodule
