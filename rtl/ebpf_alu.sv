// Single-cycle ALU of the EXE stage: every ALU64/ALU32 operation except
// division and modulo (ebpf_div), plus byte swaps and sign-extending moves.
// `a` is the destination register's value, `b` the source (register or
// sign-extended immediate); 32-bit results are zero-extended.
module ebpf_alu
(
    input  logic [3:0]  op,
    input  logic        is64,
    input  logic        src_x,   // source is a register (opcode bit 3)
    input  logic [15:0] off,     // movsx width (8/16/32)
    input  logic [31:0] imm,     // byte-swap width (16/32/64)
    input  logic [63:0] a,
    input  logic [63:0] b,
    output logic [63:0] y
);
  `include "ebpf_defs.svh"
  logic [31:0] a32, b32, r32;
  logic [63:0] r64;
  logic [63:0] swapped;
  logic [15:0] sw16;
  logic [31:0] sw32;

  assign a32 = a[31:0];
  assign b32 = b[31:0];

  assign sw16 = {a[7:0], a[15:8]};
  assign sw32 = {a[7:0], a[15:8], a[23:16], a[31:24]};

  // le/be/bswap: opcode bit 3 (src_x) set on the ALU class means "to big
  // endian" (a swap on this little-endian core); ALU64 END is always a swap.
  always_comb begin
    logic do_swap;
    do_swap = is64 || src_x;
    unique case (imm[6:0])
      7'd16:   swapped = do_swap ? {48'd0, sw16} : {48'd0, a[15:0]};
      7'd32:   swapped = do_swap ? {32'd0, sw32} : {32'd0, a[31:0]};
      default: swapped = do_swap ? {a[7:0], a[15:8], a[23:16], a[31:24],
                                    a[39:32], a[47:40], a[55:48], a[63:56]} : a;
    endcase
  end

  always_comb begin
    r64 = 64'd0;
    unique case (op)
      ALU_ADD:  r64 = a + b;
      ALU_SUB:  r64 = a - b;
      ALU_MUL:  r64 = a * b;
      ALU_OR:   r64 = a | b;
      ALU_AND:  r64 = a & b;
      ALU_LSH:  r64 = a << b[5:0];
      ALU_RSH:  r64 = a >> b[5:0];
      ALU_NEG:  r64 = -a;
      ALU_XOR:  r64 = a ^ b;
      ALU_MOV: begin
        unique case (off[5:0])
          6'd8:    r64 = {{56{b[7]}}, b[7:0]};
          6'd16:   r64 = {{48{b[15]}}, b[15:0]};
          6'd32:   r64 = {{32{b[31]}}, b[31:0]};
          default: r64 = b;
        endcase
      end
      ALU_ARSH: r64 = $signed(a) >>> b[5:0];
      default:  r64 = 64'd0;
    endcase
  end

  always_comb begin
    r32 = 32'd0;
    unique case (op)
      ALU_ADD:  r32 = a32 + b32;
      ALU_SUB:  r32 = a32 - b32;
      ALU_MUL:  r32 = a32 * b32;
      ALU_OR:   r32 = a32 | b32;
      ALU_AND:  r32 = a32 & b32;
      ALU_LSH:  r32 = a32 << b32[4:0];
      ALU_RSH:  r32 = a32 >> b32[4:0];
      ALU_NEG:  r32 = -a32;
      ALU_XOR:  r32 = a32 ^ b32;
      ALU_MOV: begin
        unique case (off[5:0])
          6'd8:    r32 = {{24{b32[7]}}, b32[7:0]};
          6'd16:   r32 = {{16{b32[15]}}, b32[15:0]};
          default: r32 = b32;
        endcase
      end
      ALU_ARSH: r32 = $signed(a32) >>> b32[4:0];
      default:  r32 = 32'd0;
    endcase
  end

  always_comb begin
    if (op == ALU_END) y = swapped;
    else if (is64) y = r64;
    else y = {32'd0, r32};
  end

  // Bits of the operands some operations ignore.
  logic unused;
  assign unused = ^{off[15:6], imm[31:7]};
endmodule
