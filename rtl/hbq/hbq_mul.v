// hbq_mul: N HBQ element products, E2M1 weights x E2M(ACT_BITS-3) activations
// (specs/hbq.md §1.2 "integer view", §2.1 step 1; the authors' FP_mul_vector;
// reference: coaccel.models.hbq.products).
//
// Both operands are sign-magnitude codes with a 2-bit exponent of bias 1 and subnormals:
//   weight     {s, e[1:0], m}                   value = (-1)^s * M * 2^(sh - 1)
//   activation {s, e[1:0], m[ACT_BITS-4:0]}     value = (-1)^s * M * 2^(sh - (ACT_BITS-3))
// with the significand integer M = {e != 0, m} and the shift sh = (e == 0) ? 0 : e - 1.
// Lane g computes the exact signed integer
//   o_p[PW*g +: PW] = (-1)^(sw ^ sa) * (Mw * Ma) << (shw + sha)
// in units of 2^-(1 + ACT_BITS-3) (2^-3 for E2M1 x E2M2, where |P| <= 3*7*16 = 336).
// A zero magnitude gives 0 whatever the signs (-0 codes decode to 0).
//
// Lanes: weight g at i_w[4*g +: 4], activation g at i_a[ACT_BITS*g +: ACT_BITS]. Purely
// combinational. PW is chosen by the parent (hbq_pe) as (4-2) + (ACT_BITS-2) + 5 = ACT_BITS + 5,
// the largest magnitude plus a sign bit. The lanes are one combinational process writing one
// vector (a single driver keeps event-driven simulators fast; synthesis unrolls the loop).
`default_nettype none

module hbq_mul #(
    parameter integer N = 128,       // lanes
    parameter integer ACT_BITS = 5,  // activation element width, 4..8 (E2M1 .. E2M5)
    parameter integer PW = 10        // signed product width per lane (>= ACT_BITS + 5)
) (
    input  wire [N*4-1:0]        i_w,  // E2M1 weight codes {s, e1, e0, m0}
    input  wire [N*ACT_BITS-1:0] i_a,  // E2M(ACT_BITS-3) activation codes
    output reg  [N*PW-1:0]       o_p   // signed products (two's complement)
);
  localparam integer AM = ACT_BITS - 3;  // activation mantissa bits

  // One lane: the signed product of weight code w and activation code a.
  function [PW-1:0] product(input [3:0] w, input [ACT_BITS-1:0] a);
    reg [1:0]    w_e, a_e;
    reg [1:0]    w_sig;
    reg [AM:0]   a_sig;
    reg [2:0]    sh;
    reg [AM+2:0] m;
    reg [PW-1:0] mag;
    begin
      w_e = w[2:1];
      a_e = a[ACT_BITS-2 -: 2];
      w_sig = {|w_e, w[0]};
      a_sig = {|a_e, a[AM-1:0]};
      sh = ((w_e == 2'd0) ? 3'd0 : {1'b0, w_e} - 3'd1) + ((a_e == 2'd0) ? 3'd0 : {1'b0, a_e} - 3'd1);
      m = w_sig * a_sig;  // Mw * Ma <= 3 * (2^(AM+1) - 1): AM + 3 bits
      mag = {{(PW - AM - 3) {1'b0}}, m} << sh;
      product = (w[3] ^ a[ACT_BITS-1]) ? (~mag + 1'b1) : mag;
    end
  endfunction

  integer g;
  always @* begin
    for (g = 0; g < N; g = g + 1) o_p[PW*g +: PW] = product(i_w[4*g +: 4], i_a[ACT_BITS*g +: ACT_BITS]);
  end
endmodule

`default_nettype wire
