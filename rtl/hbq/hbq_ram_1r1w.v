// hbq_ram_1r1w: simple dual-port RAM, one write port and one synchronous read port
// (the activation and partial-sum buffers of hbq_array; an SRAM macro in the ASIC).
//
// Write: i_we at a rising edge stores i_wdata at i_waddr. Read: i_re at a rising edge registers
// mem[i_raddr] into o_rdata (one cycle read latency; o_rdata holds while i_re is low). A read
// and a write of the same address in one cycle return the OLD word. No reset: like an SRAM the
// contents (and o_rdata before the first read) are undefined until written.
`default_nettype none

module hbq_ram_1r1w (i_clk, i_we, i_waddr, i_wdata, i_re, i_raddr, o_rdata);
  parameter integer W = 8;       // word width
  parameter integer DEPTH = 16;  // words

  localparam integer AW = (DEPTH > 1) ? $clog2(DEPTH) : 1;

  input  wire          i_clk;
  input  wire          i_we;
  input  wire [AW-1:0] i_waddr;
  input  wire [W-1:0]  i_wdata;
  input  wire          i_re;
  input  wire [AW-1:0] i_raddr;
  output reg  [W-1:0]  o_rdata;

  reg [W-1:0] mem[0:DEPTH-1];

  always @(posedge i_clk) begin
    if (i_we) mem[i_waddr] <= i_wdata;
    if (i_re) o_rdata <= mem[i_raddr];
  end
endmodule

`default_nettype wire
