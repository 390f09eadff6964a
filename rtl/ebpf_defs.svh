// Constants of the eBPF instruction encoding (RFC 9669) and of the core's
// data memory map, included in the body of every module of the processor
// (a header rather than a package: Debian's Yosys reads no `import`).
  // Every encoding is named, whether this slice uses it or not.
  /* verilator lint_off UNUSEDPARAM */

  // Instruction classes (opcode[2:0]).
  localparam logic [2:0] CLS_LD    = 3'h0;
  localparam logic [2:0] CLS_LDX   = 3'h1;
  localparam logic [2:0] CLS_ST    = 3'h2;
  localparam logic [2:0] CLS_STX   = 3'h3;
  localparam logic [2:0] CLS_ALU   = 3'h4;
  localparam logic [2:0] CLS_JMP   = 3'h5;
  localparam logic [2:0] CLS_JMP32 = 3'h6;
  localparam logic [2:0] CLS_ALU64 = 3'h7;

  // ALU operations (opcode[7:4]).
  localparam logic [3:0] ALU_ADD  = 4'h0;
  localparam logic [3:0] ALU_SUB  = 4'h1;
  localparam logic [3:0] ALU_MUL  = 4'h2;
  localparam logic [3:0] ALU_DIV  = 4'h3;
  localparam logic [3:0] ALU_OR   = 4'h4;
  localparam logic [3:0] ALU_AND  = 4'h5;
  localparam logic [3:0] ALU_LSH  = 4'h6;
  localparam logic [3:0] ALU_RSH  = 4'h7;
  localparam logic [3:0] ALU_NEG  = 4'h8;
  localparam logic [3:0] ALU_MOD  = 4'h9;
  localparam logic [3:0] ALU_XOR  = 4'ha;
  localparam logic [3:0] ALU_MOV  = 4'hb;
  localparam logic [3:0] ALU_ARSH = 4'hc;
  localparam logic [3:0] ALU_END  = 4'hd;

  // Jump operations (opcode[7:4]).
  localparam logic [3:0] JMP_JA   = 4'h0;
  localparam logic [3:0] JMP_JEQ  = 4'h1;
  localparam logic [3:0] JMP_JGT  = 4'h2;
  localparam logic [3:0] JMP_JGE  = 4'h3;
  localparam logic [3:0] JMP_JSET = 4'h4;
  localparam logic [3:0] JMP_JNE  = 4'h5;
  localparam logic [3:0] JMP_JSGT = 4'h6;
  localparam logic [3:0] JMP_JSGE = 4'h7;
  localparam logic [3:0] JMP_CALL = 4'h8;
  localparam logic [3:0] JMP_EXIT = 4'h9;
  localparam logic [3:0] JMP_JLT  = 4'ha;
  localparam logic [3:0] JMP_JLE  = 4'hb;
  localparam logic [3:0] JMP_JSLT = 4'hc;
  localparam logic [3:0] JMP_JSLE = 4'hd;

  // Memory modes (opcode[7:5]) and sizes (opcode[4:3]).
  localparam logic [2:0] MODE_IMM   = 3'h0;
  localparam logic [2:0] MODE_MEM   = 3'h3;
  localparam logic [2:0] MODE_MEMSX = 3'h4;
  localparam logic [2:0] MODE_ATOMIC = 3'h6;

  // Atomic operations (imm of a MODE_ATOMIC store).
  localparam logic [31:0] ATOMIC_ADD     = 32'h00;
  localparam logic [31:0] ATOMIC_OR      = 32'h40;
  localparam logic [31:0] ATOMIC_AND     = 32'h50;
  localparam logic [31:0] ATOMIC_XOR     = 32'ha0;
  localparam logic [31:0] ATOMIC_FETCH   = 32'h01;
  localparam logic [31:0] ATOMIC_XCHG    = 32'he1;
  localparam logic [31:0] ATOMIC_CMPXCHG = 32'hf1;
  localparam logic [1:0] SZ_W  = 2'h0;
  localparam logic [1:0] SZ_H  = 2'h1;
  localparam logic [1:0] SZ_B  = 2'h2;
  localparam logic [1:0] SZ_DW = 2'h3;

  // Address regions: a data address is `region << 32 | offset`, the same
  // layout nfkit's VM gives pointers.
  localparam logic [31:0] REGION_META   = 32'd3;
  localparam logic [31:0] REGION_PACKET = 32'd4;
  localparam logic [31:0] REGION_STACK  = 32'd5;
  // Map values (the coprocessor's value slots): the VM's region of map 0,
  // never a stack frame of the core (it has no bpf-to-bpf calls).
  localparam logic [31:0] REGION_VALUE  = 32'd69;
  localparam int STACK_BYTES = 512;
  localparam int META_BYTES  = 64;

  // Why a run stopped with a fault.
  localparam logic [2:0] FAULT_NONE    = 3'd0;
  localparam logic [2:0] FAULT_MEM     = 3'd1;  // access outside every window
  localparam logic [2:0] FAULT_ILLEGAL = 3'd2;  // opcode the core lacks
  localparam logic [2:0] FAULT_HELPER  = 3'd3;  // call to a helper the coprocessor lacks
  localparam logic [2:0] FAULT_BUDGET  = 3'd4;  // cycle budget exhausted (set by the host)
  localparam logic [2:0] FAULT_CAPACITY = 3'd5; // a map sized down by the host ran out of lines

  /* verilator lint_on UNUSEDPARAM */
