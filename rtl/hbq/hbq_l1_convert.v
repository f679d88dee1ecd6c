// hbq_l1_convert: L1-scale application and fixed-point to FP16 conversion
// (specs/hbq.md §2.1 step 5; reference: coaccel.models.hbq.l1_convert).
//
// Input: the signed block sum P_total in units of 2^-F and the two E5M3 L1 scale codes
// {E[4:0], M[2:0]} (activation i_sa = Ex, Mx; weight i_sw = Ew, Mw; E in 1..30). The exact real
// result is
//     P_total * (8+Mx)(8+Mw) * 2^(Ex+Ew-36-F).
//
// OUT_MODE = 0, "exact": that value is rounded ONCE to binary16, round to nearest even, with an
// unbounded exponent; then a biased exponent above 30 saturates to +-65504 (0x7BFF | sign) and
// one below 1 is flushed to +0 (a value that rounds up to 2^-14 is kept); zero gives +0.
//   q = |P_total| * (8+Mx)(8+Mw)          exact, PTW + 8 bits
//   k = index of the leading one of q
//   sig = top 11 bits of q, guard = next bit, sticky = OR of the rest
//   sig += guard & (sticky | sig[0])      (RNE); a carry out renormalizes (sig = 1024, k + 1)
//   E = k + Ex + Ew - 21 - F              biased binary16 exponent
//
// OUT_MODE = 1, "rtl_compat": the authors' FX2FP + Scale_NV unit, step by step as in the
// reference docstring:
//   k = index of the leading one of a = |P_total|; sig11 = top 11 significant bits of a
//   (lower bits TRUNCATED, or a shifted up when it has fewer than 11 bits);
//   prod = sig11 * (8+Mx)(8+Mw) (19 bits), n = 0/1/2 normalizes its leading one to bit 16+n;
//   sig = prod >> (6+n), plus the single guard bit prod[5+n] (half up, no sticky); a carry
//   renormalizes; E = Ex + Ew + (k + n - F) - 15; then the same saturate / flush rules.
//
// Purely combinational.
`default_nettype none

module hbq_l1_convert #(
    parameter integer PTW = 24,     // width of the signed P_total input (>= 11)
    parameter integer F = 7,        // fractional bits of P_total
    parameter integer OUT_MODE = 0  // 0 = exact (RNE once), 1 = rtl_compat
) (
    input  wire [PTW-1:0] i_p,    // P_total, two's complement, units 2^-F
    input  wire [7:0]     i_sa,   // activation E5M3 scale code
    input  wire [7:0]     i_sw,   // weight E5M3 scale code
    output wire [15:0]    o_fp16  // binary16 bit pattern
);
  localparam integer QW = PTW + 8;              // |P_total| times the 8-bit scale product
  localparam integer KW = $clog2(QW) + 1;       // leading-one index width
  // Biased exponents span [-(21 + F), QW + 61]; EW signed bits hold that range.
  localparam integer EW = $clog2(QW + 62 + 21 + F) + 2;

  // Index of the most significant set bit (0 for v == 0; callers test for zero separately).
  function [KW-1:0] msb_index(input [QW-1:0] v);
    integer i;
    begin
      msb_index = {KW{1'b0}};
      for (i = 0; i < QW; i = i + 1) if (v[i]) msb_index = i[KW-1:0];
    end
  endfunction

  wire            neg = i_p[PTW-1];
  wire [PTW-1:0]  mag = neg ? (~i_p + 1'b1) : i_p;  // |P_total| (2^(PTW-1) fits unsigned)
  wire [3:0]      sig_x = {1'b1, i_sa[2:0]};
  wire [3:0]      sig_w = {1'b1, i_sw[2:0]};
  wire [7:0]      s = {4'd0, sig_x} * {4'd0, sig_w};  // (1.Mx)(1.Mw), 6 fractional bits
  wire [5:0]      esum = {1'b0, i_sa[7:3]} + {1'b0, i_sw[7:3]};
  wire            zero = (mag == {PTW{1'b0}});

  wire [9:0]          mant;
  wire signed [EW-1:0] e_biased;

  generate
    if (OUT_MODE == 0) begin : g_exact
      wire [QW-1:0] q = {8'd0, mag} * {{(QW - 8) {1'b0}}, s};
      wire [KW-1:0] k = msb_index(q);
      wire [QW-1:0] qn = q << (QW - 1 - k);  // leading one at bit QW-1
      wire [10:0]   sig = qn[QW-1 -: 11];
      wire          guard = qn[QW-12];
      wire          sticky = |qn[QW-13:0];
      wire          up = guard & (sticky | sig[0]);
      wire [11:0]   sig_r = {1'b0, sig} + {11'd0, up};
      wire          carry = sig_r[11];
      assign mant = carry ? 10'd0 : sig_r[9:0];
      assign e_biased = $signed({{(EW - KW) {1'b0}}, k}) + $signed({{(EW - 6) {1'b0}}, esum})
                      + $signed({{(EW - 1) {1'b0}}, carry}) - (21 + F);
    end else begin : g_rtl_compat
      wire [KW-1:0]  k = msb_index({8'd0, mag});
      wire [PTW-1:0] an = mag << (PTW - 1 - k);  // leading one at bit PTW-1
      wire [10:0]    sig11 = an[PTW-1 -: 11];    // truncation of the lower bits
      wire [18:0]    prod = {8'd0, sig11} * {11'd0, s};
      wire [1:0]     n = prod[18] ? 2'd2 : (prod[17] ? 2'd1 : 2'd0);
      wire [18:0]    prod_n = prod >> n;          // leading one at bit 16
      wire [10:0]    sig = prod_n[16:6];
      wire           guard = prod_n[5];
      wire [11:0]    sig_r = {1'b0, sig} + {11'd0, guard};
      wire           carry = sig_r[11];
      assign mant = carry ? 10'd0 : sig_r[9:0];
      assign e_biased = $signed({{(EW - KW) {1'b0}}, k}) + $signed({{(EW - 6) {1'b0}}, esum})
                      + $signed({{(EW - 2) {1'b0}}, n}) + $signed({{(EW - 1) {1'b0}}, carry})
                      - (15 + F);
    end
  endgenerate

  wire overflow = (e_biased > 30);
  wire underflow = (e_biased < 1);
  assign o_fp16 = (zero || underflow) ? 16'h0000
                : overflow ? {neg, 15'h7BFF}
                : {neg, e_biased[4:0], mant};
endmodule

`default_nettype wire
