// Multi-cycle divider of the EXE stage: unsigned and signed (ISA v4
// sdiv/smod) division and modulo, 64- or 32-bit, one quotient bit per
// cycle (restoring division on magnitudes). Division by zero gives 0,
// modulo by zero the dividend (zero-extended for 32-bit), as eBPF defines.
// `start` latches the operands; `done` rises when `y` holds the result and
// stays until the next `start`.
module ebpf_div (
    input  logic        clk,
    input  logic        rst,
    input  logic        start,
    input  logic        ack,     // the result was taken: drop `done`
    input  logic        is64,
    input  logic        is_mod,
    input  logic        signed_op,
    input  logic [63:0] a,
    input  logic [63:0] b,
    output logic        busy,
    output logic        done,
    output logic [63:0] y
);
  logic [63:0] dividend, divisor, quot;
  logic [63:0] rem;
  logic [6:0]  count;
  logic        neg_q, neg_r, mod_q, w64;

  // Magnitudes of the operands in the operation's width.
  logic        a_neg, b_neg;
  logic [63:0] a_w, b_w, a_mag, b_mag;
  always_comb begin
    a_w = is64 ? a : {32'd0, a[31:0]};
    b_w = is64 ? b : {32'd0, b[31:0]};
    a_neg = signed_op && (is64 ? a[63] : a[31]);
    b_neg = signed_op && (is64 ? b[63] : b[31]);
    a_mag = a_neg ? (is64 ? -a_w : {32'd0, -a_w[31:0]}) : a_w;
    b_mag = b_neg ? (is64 ? -b_w : {32'd0, -b_w[31:0]}) : b_w;
  end

  // One restoring step.
  logic [64:0] rem_shift, rem_sub;
  assign rem_shift = {rem, dividend[63]};
  assign rem_sub   = rem_shift - {1'b0, divisor};

  // The signed result in the operation's width.
  logic [63:0] q_out, r_out, res;
  always_comb begin
    q_out = neg_q ? -quot : quot;
    r_out = neg_r ? -rem : rem;
    res   = mod_q ? r_out : q_out;
    if (!w64) res = {32'd0, res[31:0]};
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      busy <= 1'b0;
      done <= 1'b0;
      count <= 7'd0;
      y <= 64'd0;
      dividend <= 64'd0;
      divisor <= 64'd0;
      quot <= 64'd0;
      rem <= 64'd0;
      neg_q <= 1'b0;
      neg_r <= 1'b0;
      mod_q <= 1'b0;
      w64 <= 1'b0;
    end else if (ack) begin
      done <= 1'b0;
    end else if (start) begin
      done <= 1'b0;
      if (b_w == 64'd0) begin
        // No iterations: div by zero is 0, mod by zero the dividend.
        y <= is_mod ? a_w : 64'd0;
        done <= 1'b1;
        busy <= 1'b0;
      end else begin
        busy <= 1'b1;
        dividend <= is64 ? a_mag : {a_mag[31:0], 32'd0};
        divisor <= b_mag;
        quot <= 64'd0;
        rem <= 64'd0;
        count <= is64 ? 7'd64 : 7'd32;
        neg_q <= a_neg ^ b_neg;
        neg_r <= a_neg;
        mod_q <= is_mod;
        w64 <= is64;
      end
    end else if (busy) begin
      if (count == 7'd0) begin
        busy <= 1'b0;
        done <= 1'b1;
        y <= res;
      end else begin
        dividend <= {dividend[62:0], 1'b0};
        if (!rem_sub[64]) begin
          rem <= rem_sub[63:0];
          quot <= {quot[62:0], 1'b1};
        end else begin
          rem <= rem_shift[63:0];
          quot <= {quot[62:0], 1'b0};
        end
        count <= count - 7'd1;
      end
    end
  end
endmodule
