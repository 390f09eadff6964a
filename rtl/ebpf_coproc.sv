// The coprocessor behind `call`: serves helper calls with a fixed latency
// of LATENCY cycles, acknowledging with the result in r0. This slice
// serves bpf_ktime_get_ns (5: the packet's timestamp from the metadata)
// and bpf_get_smp_processor_id (8: the engine's number); any other id is
// acknowledged with `bad` (the loader refuses such programs first).
// Map lookup/update/delete (CAM, LPM, array) come here next.
module ebpf_coproc #(
    parameter int LATENCY = 2,
    parameter logic [63:0] ENGINE_ID = 64'd0
) (
    input  logic        clk,
    input  logic        rst,
    input  logic        req,
    input  logic [31:0] id,
    input  logic [63:0] arg1,
    input  logic [63:0] arg2,
    input  logic [63:0] arg3,
    input  logic [63:0] arg4,
    input  logic [63:0] arg5,
    input  logic [63:0] timestamp,
    output logic        ack,
    output logic        bad,
    output logic [63:0] result
);
  localparam logic [31:0] HELPER_KTIME_GET_NS = 32'd5;
  localparam logic [31:0] HELPER_SMP_PROCESSOR_ID = 32'd8;

  logic [7:0] wait_cycles;
  logic       busy;

  always_ff @(posedge clk) begin
    if (rst) begin
      busy <= 1'b0;
      wait_cycles <= 8'd0;
      ack <= 1'b0;
      bad <= 1'b0;
      result <= 64'd0;
    end else begin
      ack <= 1'b0;
      if (!busy && req && !ack) begin
        busy <= 1'b1;
        wait_cycles <= 8'(LATENCY - 1);
      end else if (busy) begin
        if (wait_cycles == 8'd0) begin
          busy <= 1'b0;
          ack <= 1'b1;
          bad <= 1'b0;
          unique case (id)
            HELPER_KTIME_GET_NS:     result <= timestamp;
            HELPER_SMP_PROCESSOR_ID: result <= ENGINE_ID;
            default: begin
              result <= 64'd0;
              bad <= 1'b1;
            end
          endcase
        end else begin
          wait_cycles <= wait_cycles - 8'd1;
        end
      end
    end
  end

  // Arguments the helpers of this slice do not read (maps will).
  logic unused;
  assign unused = ^{arg1, arg2, arg3, arg4, arg5};
endmodule
