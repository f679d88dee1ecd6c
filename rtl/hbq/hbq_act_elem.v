// hbq_act_elem: one element of the HBQ-E activation quantizer (specs/hbq.md §1.6, §1.7;
// docs/hbq_format.md §3-§4): a binary16 value -> E2M2 code, given the block's L1 scale and the
// micro-block's L2 multiplier. Combinational; exact, without a divider.
//
// With the scale S1 = D * 2^(E-18) (D = 8 + M in 8..15) and the value x = X * 2^(ee-25)
// (X the 11-bit significand, hidden bit included; a subnormal has X = m and ee = 1), the
// scaled magnitude a = |x| / S1 satisfies
//     8 * a * D = R,   R = X * 2^(ee - E - 4),
// so every E2M2 rounding boundary beta (a multiple of 1/8) is crossed exactly when
//     a >= beta  <=>  R >= 8 * beta * D  <=>  N >= 8 * beta * D,   N = floor(R),
// because 8 * beta * D is an integer. The parent supplies those integer thresholds (shared by
// the block, doubled for L2 multiplier 2), so the element needs one right shift (N) and fifteen
// comparisons. The E2M2 magnitude codes 0..15 are in value order, so the magnitude code is the
// number of thresholds reached (round half away from zero: a tie reaches its threshold;
// saturation at 7: code 15). ROUNDING = 1 (nearest even): a value exactly on the boundary of an
// odd code (N equal to the threshold and no bit of X dropped by the shift) takes the even code
// below it instead.
//
// o_big flags a >= 7.5 (R >= 60 * D, the L2 threshold rule; compared at L2 multiplier 1).
// Inf (exponent 31) saturates to +-max and never raises o_big (the reference computes the scale
// and the L2 codes from the finite values and gives each +-Inf the +-max code); NaN is outside
// the contract (the reference raises). A zero magnitude result is code 0 (the sign of zero is not
// kept).
//
// Parameters:
//   ROUNDING : 0 = half away from zero (default), 1 = nearest even
//   TW       : threshold width (12 holds 2 * 52 * 15 = 1560 and the saturation value of N)
// Ports:
//   i_x      : binary16 value
//   i_e_scale: the exponent field E of the block's E5M3 scale code {E[4:0], M[2:0]}
//   i_thr    : the 15 thresholds 8 * beta_k * D * (L2 multiplier), threshold k-1 at [TW*(k-1) +: TW]
//   i_thr_l2 : 60 * D
//   o_code   : E2M2 code {s, e[1:0], m[1:0]}
//   o_big    : a >= 7.5 at L2 multiplier 1
`default_nettype none

module hbq_act_elem #(
    parameter integer ROUNDING = 0,
    parameter integer TW = 12
) (
    input  wire [15:0]      i_x,
    input  wire [4:0]       i_e_scale,
    input  wire [15*TW-1:0] i_thr,
    input  wire [TW-1:0]    i_thr_l2,
    output wire [4:0]       o_code,
    output wire             o_big
);
    localparam integer SW = 11;

    wire       sign = i_x[15];
    wire [4:0] ex = i_x[14:10];
    wire       is_inf = (ex == 5'd31);
    wire [4:0] ee = (ex == 5'd0) ? 5'd1 : ex;
    wire [SW-1:0] xs = (ex == 5'd0) ? {1'b0, i_x[9:0]} : {1'b1, i_x[9:0]};

    // N = floor(X * 2^-s) with s = E + 4 - ee; s < 0 (never for a scale from this block's amax,
    // kept for safety) saturates.
    wire signed [6:0] s = $signed({2'b00, i_e_scale}) + 7'sd4 - $signed({2'b00, ee});
    wire [5:0]    sh = s[5:0];
    wire [2*SW-1:0] t = {xs, {SW{1'b0}}} >> sh;  // integer part on top, dropped bits below
    wire          neg_shift = s[6];
    wire [TW-1:0] n = neg_shift ? {TW{1'b1}} : {{(TW - SW){1'b0}}, t[2*SW-1:SW]};
    // No bit of X was dropped. Bits shifted past the bottom of t (a shift above SW) are not
    // seen, but then N = 0, and a tie needs N >= 8 (the lowest threshold is D >= 8).
    wire          exact = ~neg_shift & ~(|t[SW-1:0]);

    // Thermometer of reached thresholds -> magnitude code; ties on odd codes (RNE) step down.
    reg [3:0] idx;
    reg       tie_odd;
    integer k;
    always @* begin
        idx = 4'd0;
        tie_odd = 1'b0;
        for (k = 1; k <= 15; k = k + 1) begin
            if (n >= i_thr[TW*(k-1) +: TW]) idx = k[3:0];
            if ((k % 2 == 1) && exact && (n == i_thr[TW*(k-1) +: TW])) tie_odd = 1'b1;
        end
    end
    wire [3:0] mag = is_inf ? 4'd15 : (ROUNDING == 1) ? idx - {3'd0, tie_odd} : idx;
    assign o_code = {sign & (mag != 4'd0), mag};
    assign o_big = ~is_inf & (n >= i_thr_l2);
endmodule

`default_nettype wire
