// Multi-cycle divider of the EXE stage: unsigned and signed (ISA v4
// sdiv/smod) division and modulo, 64- or 32-bit, on magnitudes, two
// restoring steps (two quotient bits) per cycle. It skips the quotient's
// leading zeros: with an n-bit dividend magnitude and an m-bit divisor
// magnitude only the n - m + 1 low quotient bits can be set, so the
// partial remainder starts as the dividend's top m - 1 bits and those
// n - m + 1 steps run (a dividend smaller than the divisor needs none).
// Division by zero gives 0, modulo by zero the dividend (zero-extended
// for 32-bit), as eBPF defines. `start` latches the operands; `done`
// rises when `y` holds the result and stays until `ack`.
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

  // Significant bits of a value (0 for 0): a priority encoder.
  function automatic logic [6:0] width_of(input logic [63:0] v);
    width_of = 7'd0;
    for (int i = 0; i < 64; i++) if (v[i]) width_of = 7'(i + 1);
  endfunction

  // The steps a division takes and its starting state.
  logic [6:0]  a_bits, b_bits, steps;
  logic [63:0] rem0, dividend0;
  always_comb begin
    a_bits = width_of(a_mag);
    b_bits = width_of(b_mag);
    steps = (a_bits >= b_bits) ? a_bits - b_bits + 7'd1 : 7'd0;
    // The bits above the steps' form the first partial remainder; the
    // rest move to the top of `dividend`, consumed one per step.
    rem0 = (steps == 7'd64) ? 64'd0 : a_mag >> steps;
    dividend0 = (steps == 7'd0) ? 64'd0 : a_mag << (7'd64 - steps);
  end

  // One restoring step: shift in the dividend's next bit, subtract if it
  // fits.
  function automatic logic [127:0] step(input logic [63:0] r, input logic d,
                                         input logic [62:0] q, input logic [63:0] dv);
    logic [64:0] sh, sub;
    sh = {r, d};
    sub = sh - {1'b0, dv};
    if (!sub[64]) step = {sub[63:0], q, 1'b1};
    else step = {sh[63:0], q, 1'b0};
  endfunction

  // This cycle's one or two steps.
  logic [127:0] s1, s2;
  logic [63:0]  rem_n, quot_n, dividend_n;
  logic         two;
  always_comb begin
    two = count >= 7'd2;
    s1 = step(rem, dividend[63], quot[62:0], divisor);
    s2 = step(s1[127:64], dividend[62], s1[62:0], divisor);
    rem_n = two ? s2[127:64] : s1[127:64];
    quot_n = two ? s2[63:0] : s1[63:0];
    dividend_n = two ? {dividend[61:0], 2'b0} : {dividend[62:0], 1'b0};
  end

  // A step shifts the quotient's top bit out.
  logic unused;
  assign unused = quot[63];

  // The signed result in the operation's width.
  function automatic logic [63:0] result(input logic [63:0] q, input logic [63:0] r,
                                          input logic nq, input logic nr, input logic m,
                                          input logic wide);
    logic [63:0] v;
    v = m ? (nr ? -r : r) : (nq ? -q : q);
    result = wide ? v : {32'd0, v[31:0]};
  endfunction

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
        // No steps: div by zero is 0, mod by zero the dividend.
        y <= is_mod ? a_w : 64'd0;
        done <= 1'b1;
        busy <= 1'b0;
      end else if (steps == 7'd0) begin
        // The dividend is smaller than the divisor: quotient 0.
        y <= result(64'd0, a_mag, a_neg ^ b_neg, a_neg, is_mod, is64);
        done <= 1'b1;
        busy <= 1'b0;
      end else begin
        busy <= 1'b1;
        dividend <= dividend0;
        divisor <= b_mag;
        quot <= 64'd0;
        rem <= rem0;
        count <= steps;
        neg_q <= a_neg ^ b_neg;
        neg_r <= a_neg;
        mod_q <= is_mod;
        w64 <= is64;
      end
    end else if (busy) begin
      dividend <= dividend_n;
      rem <= rem_n;
      quot <= quot_n;
      count <= two ? count - 7'd2 : count - 7'd1;
      if (count <= 7'd2) begin
        // The last steps: the result now.
        busy <= 1'b0;
        done <= 1'b1;
        y <= result(quot_n, rem_n, neg_q, neg_r, mod_q, w64);
      end
    end
  end
endmodule
