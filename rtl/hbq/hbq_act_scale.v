// hbq_act_scale: E5M3 L1 scale of an HBQ-E activation block from its largest magnitude
// (specs/hbq.md §1.3, §1.6; docs/hbq_format.md §3-§4, threshold mode).
//
// The reference scale is the exact quotient amax / 14 (E2M2 max 7 times the largest 1-bit PoT/INT
// multiplier 2) rounded to E5M3 (half up, or up for SCALE_ROUNDING = 1) and clipped to
// [2^-14, 61440]. Combinational; exact, without a divider:
//
//   amax = A * 2^(ea-25) with the 11-bit significand A (1024..2047) and biased exponent ea, so
//   amax / 14 = (A / 7) * 2^(ea-26), and A / 7 lies in [146.3, 292.5): its binade is 2^7 when
//   A < 1792 and 2^8 otherwise. With L = 112 (binade 2^7) or 224 (binade 2^8), the E5M3
//   significand in eighths is m8 = round(A / L) in 8..16, found by comparing A with the
//   constant midpoints (k - 1/2) * L (half up: A >= midpoint) or with k * L - L + 1 (ceil:
//   A > (k - 1) * L); m8 = 16 carries into the exponent. E = ea - 4 (binade 2^7) or ea - 3.
//   A result below 2^-14 (E < 1, or a zero / subnormal amax) is clipped to 2^-14 (code 0x08).
//   amax <= 65504 keeps E <= 27, so the upper clip never applies to binary16 inputs.
//
// Parameters:
//   SCALE_ROUNDING : 0 = half up (default, the reference's "half_up"), 1 = ceil
// Ports:
//   i_amax  : largest |x| of the block, binary16 magnitude bits {e[4:0], m[9:0]} (finite)
//   o_scale : E5M3 code {E[4:0], M[2:0]}
`default_nettype none

module hbq_act_scale #(
    parameter integer SCALE_ROUNDING = 0
) (
    input  wire [14:0] i_amax,
    output wire [7:0]  o_scale
);
    localparam [7:0] MIN_SCALE = 8'h08;  // 2^-14: E = 1, M = 0

    wire [4:0]  ea = i_amax[14:10];
    wire [10:0] a = {1'b1, i_amax[9:0]};
    wire        high = (a >= 11'd1792);  // A / 7 >= 256: binade 2^8
    // A and 2A widened to the 32 bits of the integer boundaries they are compared with.
    wire [31:0] a1 = {21'd0, a};
    wire [31:0] a2 = {20'd0, a, 1'b0};

    // m8 = 8 + #{k in 9..16 : A reaches the rounding boundary between k - 1 and k}.
    reg [4:0] m8;
    integer k;
    always @* begin
        m8 = 5'd8;
        for (k = 9; k <= 16; k = k + 1) begin
            if (SCALE_ROUNDING == 0) begin
                // half up: A / L >= k - 1/2  <=>  2A >= (2k - 1) * L
                if (a2 >= (high ? (2 * k - 1) * 224 : (2 * k - 1) * 112))
                    m8 = k[4:0];
            end else begin
                // ceil: A / L > k - 1  <=>  A > (k - 1) * L
                if (a1 > (high ? (k - 1) * 224 : (k - 1) * 112))
                    m8 = k[4:0];
            end
        end
    end

    wire       carry = (m8 == 5'd16);
    wire [2:0] mant = carry ? 3'd0 : m8[2:0];
    // E = ea - 4 + high + carry, computed with headroom for the clip test.
    wire signed [6:0] e_s = $signed({2'b00, ea}) - 7'sd4 + $signed({6'd0, high})
                          + $signed({6'd0, carry});
    wire clip = (ea == 5'd0) || (e_s < 7'sd1);
    assign o_scale = clip ? MIN_SCALE : {e_s[4:0], mant};
endmodule

`default_nettype wire
