// Instruction memory: 8-byte slots in two banks (even and odd slots), each
// a simple dual-port RAM with a synchronous read (block RAM on an FPGA),
// so that one access gives slot `raddr` and slot `raddr + 1` (the second
// half of an `lddw`). The address is taken at the clock edge; `rdata0` and
// `rdata1` hold the two slots in the following cycle. The host writes
// slots between runs.
module ebpf_imem #(
    parameter int IAW = 12
) (
    input  logic           clk,
    input  logic [IAW-1:0] raddr,
    output logic [63:0]    rdata0,
    output logic [63:0]    rdata1,
    input  logic           we,
    input  logic [IAW-1:0] waddr,
    input  logic [63:0]    wdata
);
  localparam int ROWS = 1 << (IAW - 1);

  logic [63:0] even [ROWS];
  logic [63:0] odd  [ROWS];
  logic [63:0] even_q, odd_q;
  logic        odd_q_first;
  logic [IAW-1:0] raddr_plus1;

  assign raddr_plus1 = raddr + IAW'(1);

  always_ff @(posedge clk) begin
    if (we && !waddr[0]) even[waddr[IAW-1:1]] <= wdata;
    even_q <= even[raddr_plus1[IAW-1:1]];
  end

  always_ff @(posedge clk) begin
    if (we && waddr[0]) odd[waddr[IAW-1:1]] <= wdata;
    odd_q <= odd[raddr[IAW-1:1]];
    odd_q_first <= raddr[0];
  end

  assign rdata0 = odd_q_first ? odd_q : even_q;
  assign rdata1 = odd_q_first ? even_q : odd_q;

  logic unused;
  assign unused = raddr_plus1[0];
endmodule
