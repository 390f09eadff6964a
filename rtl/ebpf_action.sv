// The action module: turns a finished run's r0 (and the redirect the
// run set) into one of nfkit's actions (docs/abi.md 1: ABORTED 0, DROP 1,
// PASS 2, TX 3, REDIRECT 4, FLOOD 5, CONTROLLER 6, HOST 7) with its
// argument, and that into where the packet goes, as the software switch
// decides it (nfkit-switch's `action::resolve` and `action::decide`):
//
// * verdict mode (a chain built for the switch hook): r0 is nfkit's
//   64-bit verdict (bit 63 set, bits 40-62 clear, the action in bits
//   32-39, the argument in bits 0-31); anything else, or a faulted run,
//   takes the fault action (`fault_verdict`, DROP when that is no
//   verdict) and is counted (`counted`);
// * XDP mode: r0 is an XDP return code; XDP_REDIRECT is REDIRECT to the
//   port bpf_redirect set (a devmap entry: its index), FLOOD after a
//   devmap broadcast; a code above XDP_REDIRECT, or XDP_REDIRECT with no
//   redirect set, is ABORTED; a faulted run takes the fault action.
//
// Ports are indices from 0 (REDIRECT's argument numbers them from 1);
// `hosts` lists the host queues' ports (PASS and HOST(0) the first,
// HOST(q) the q-th, a queue beyond `host_n` the first).
module ebpf_action #(
    parameter int PORTS = 4,
    parameter int HOSTS = 4
) (
    input  logic               verdict_mode,
    input  logic [63:0]        r0,
    input  logic               faulted,
    input  logic [1:0]         redir_kind,  // 0 none, 1 port, 2 devmap entry, 3 broadcast
    input  logic               redir_excl,
    input  logic [31:0]        redir_arg,
    input  logic [7:0]         in_port,
    input  logic [7:0]         nports,
    input  logic [63:0]        fault_verdict,
    input  logic [HOSTS*8-1:0] hosts,
    input  logic [7:0]         host_n,
    output logic [2:0]         action,
    output logic [31:0]        arg,
    output logic               counted,
    // 0 drop, 1 one port (`out_port`), 2 flood, 3 controller, 4 no host
    // port (dropped), 5 no such port (dropped).
    output logic [2:0]         decision,
    output logic [7:0]         out_port,
    // The ports a copy leaves by.
    output logic [PORTS-1:0]   out_mask
);
  localparam logic [2:0] A_ABORTED = 3'd0, A_DROP = 3'd1, A_PASS = 3'd2, A_TX = 3'd3,
                         A_REDIRECT = 3'd4, A_FLOOD = 3'd5, A_CONTROLLER = 3'd6, A_HOST = 3'd7;
  localparam logic [2:0] D_DROP = 3'd0, D_PORT = 3'd1, D_FLOOD = 3'd2, D_CONTROLLER = 3'd3,
                         D_NO_HOST = 3'd4, D_NO_PORT = 3'd5;

  // Bits 63-35 of a verdict: 1, then zeros (actions are 0-7).
  function automatic logic is_verdict(input logic [63:35] v);
    is_verdict = v == {1'b1, 28'd0};
  endfunction

  // The action and its argument.
  logic flood_all;  // a broadcast that includes the ingress port
  always_comb begin
    action = A_DROP;
    arg = 32'd0;
    counted = 1'b0;
    flood_all = 1'b0;
    if (faulted || (verdict_mode && !is_verdict(r0[63:35]))) begin
      counted = 1'b1;
      if (is_verdict(fault_verdict[63:35])) begin
        action = fault_verdict[34:32];
        arg = fault_verdict[31:0];
      end
    end else if (verdict_mode) begin
      action = r0[34:32];
      arg = r0[31:0];
    end else if (r0 < 64'd4) begin
      action = r0[2:0];  // ABORTED, DROP, PASS, TX: the same codes
    end else if (r0 == 64'd4 && (redir_kind == 2'd1 || redir_kind == 2'd2)) begin
      action = A_REDIRECT;
      arg = redir_arg;
    end else if (r0 == 64'd4 && redir_kind == 2'd3) begin
      action = A_FLOOD;
      flood_all = !redir_excl;
    end else begin
      action = A_ABORTED;
    end
  end

  // Where it goes.
  localparam int QW = HOSTS > 1 ? $clog2(HOSTS) : 1;
  logic [QW-1:0] q;
  always_comb begin
    decision = D_DROP;
    out_port = 8'd0;
    q = (action == A_HOST && arg < {24'd0, host_n} && arg < 32'(HOSTS)) ? arg[QW-1:0] : '0;
    unique case (action)
      A_PASS, A_HOST: begin
        if (host_n == 8'd0) decision = D_NO_HOST;
        else begin
          decision = D_PORT;
          out_port = hosts[q*8 +: 8];
        end
      end
      A_TX: begin
        decision = D_PORT;
        out_port = in_port;
      end
      A_REDIRECT: begin
        if (arg >= 32'd1 && arg <= {24'd0, nports}) begin
          decision = D_PORT;
          out_port = 8'(arg - 32'd1);
        end else decision = D_NO_PORT;
      end
      A_FLOOD: decision = D_FLOOD;
      A_CONTROLLER: decision = D_CONTROLLER;
      default: decision = D_DROP;
    endcase
    out_mask = '0;
    for (int p = 0; p < PORTS; p++) begin
      if (decision == D_PORT && out_port == 8'(p)) out_mask[p] = 1'b1;
      if (decision == D_FLOOD && 8'(p) < nports && (flood_all || 8'(p) != in_port))
        out_mask[p] = 1'b1;
    end
  end
endmodule
