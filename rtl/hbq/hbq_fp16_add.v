// hbq_fp16_add: IEEE-754 binary16 adder with the HBQ accumulator policy (specs/hbq.md §2.2).
//
// Combinational (no clock); bit-exact with coaccel.models.hbq.fp16_add:
//   * subnormal inputs are read as zero of the same sign (denormals-are-zero);
//   * the exact sum is rounded once, round-to-nearest-even;
//   * a rounded result above 65504 saturates to +-65504 (0x7BFF / 0xFBFF), never Inf;
//   * a rounded result below 2^-14 is flushed to +0;
//   * an exact zero sum is +0, except (-0) + (-0) = -0;
//   * Inf and NaN inputs follow IEEE (Inf + x = Inf, Inf + (-Inf) = NaN, NaN in -> NaN) and
//     every NaN result is the canonical quiet NaN 0x7E00.
//
// Datapath: swap so that x has the larger magnitude, align the smaller significand with three
// extra bits (guard, round, sticky), add or subtract, normalize (one right shift after a carry,
// a leading-zero left shift after cancellation), round to nearest even on the guard bit with
// round|sticky|lsb, then saturate or flush on the final exponent. Three extra bits are enough for
// a correctly rounded sum: a left shift of two or more only happens when the exponents differ by
// at most one, in which case no bit was lost to the sticky bit.
//
// Ports:
//   i_a, i_b : binary16 operands (bit patterns)
//   o_sum    : binary16 sum (bit pattern)
`default_nettype none

module hbq_fp16_add (
    input  wire [15:0] i_a,
    input  wire [15:0] i_b,
    output wire [15:0] o_sum
);
    localparam integer MW = 10;         // stored mantissa bits
    localparam integer SW = MW + 1;     // significand with hidden bit
    localparam integer XW = SW + 3;     // significand with guard, round, sticky
    localparam [15:0] NAN_BITS = 16'h7E00;
    localparam [14:0] MAX_MAG = 15'h7BFF;

    // ---- decode -------------------------------------------------------------------------
    wire       sa = i_a[15];
    wire       sb = i_b[15];
    wire [4:0] ea = i_a[14:10];
    wire [4:0] eb = i_b[14:10];
    wire [9:0] ma = i_a[9:0];
    wire [9:0] mb = i_b[9:0];

    wire a_special = (ea == 5'd31);
    wire b_special = (eb == 5'd31);
    wire a_nan = a_special & (ma != 10'd0);
    wire b_nan = b_special & (mb != 10'd0);
    wire a_inf = a_special & (ma == 10'd0);
    wire b_inf = b_special & (mb == 10'd0);
    // Denormals-are-zero: an exponent-0 code contributes nothing.
    wire a_zero = (ea == 5'd0);
    wire b_zero = (eb == 5'd0);

    // Magnitude keys; a zero (or subnormal) operand always loses the comparison.
    wire [14:0] ka = a_zero ? 15'd0 : i_a[14:0];
    wire [14:0] kb = b_zero ? 15'd0 : i_b[14:0];
    wire swap = (kb > ka);

    wire          sx = swap ? sb : sa;
    wire [4:0]    ex = swap ? eb : ea;
    wire [14:0]   kx = swap ? kb : ka;
    wire [14:0]   ky = swap ? ka : kb;
    wire          x_zero = (kx == 15'd0);
    wire          y_zero = (ky == 15'd0);
    wire [SW-1:0] sigx = x_zero ? {SW{1'b0}} : {1'b1, kx[9:0]};
    wire [SW-1:0] sigy = y_zero ? {SW{1'b0}} : {1'b1, ky[9:0]};
    // kx >= ky and a zero y has key 0, so the difference of the keys' exponent fields is the
    // alignment distance whenever y is non-zero.
    wire [4:0]    shamt = kx[14:10] - ky[14:10];
    wire          eff_sub = (sa ^ sb);

    // ---- align y: shift right by shamt, OR every bit shifted out into the sticky bit --------
    wire [XW-1:0] y_ext = {sigy, 3'b000};
    wire [XW-1:0] y_shr = (shamt >= XW[4:0]) ? {XW{1'b0}} : (y_ext >> shamt);
    // Bits lost: y_ext has nonzero bits below position shamt.
    wire [XW-1:0] lost_mask = (shamt >= XW[4:0]) ? {XW{1'b1}} : ~({XW{1'b1}} << shamt);
    wire          lost = |(y_ext & lost_mask);
    wire [XW-1:0] y_al = {y_shr[XW-1:1], y_shr[0] | lost};
    wire [XW-1:0] x_al = {sigx, 3'b000};

    // ---- add / subtract ------------------------------------------------------------------
    wire [XW:0] sum_raw = eff_sub ? ({1'b0, x_al} - {1'b0, y_al}) : ({1'b0, x_al} + {1'b0, y_al});

    // ---- normalize ---------------------------------------------------------------------
    // Leading-zero count of sum_raw[XW-1:0] (only used when there is no carry).
    reg [3:0] lzc;
    integer i;
    always @* begin
        lzc = XW[3:0];
        for (i = 0; i < XW; i = i + 1)
            if (sum_raw[i]) lzc = XW[3:0] - 1'b1 - i[3:0];
    end
    wire          carry = sum_raw[XW];
    wire          is_zero = (sum_raw == {(XW + 1){1'b0}});
    wire [XW-1:0] norm = carry ? {sum_raw[XW:2], sum_raw[1] | sum_raw[0]}
                               : (sum_raw[XW-1:0] << lzc);
    // Exponent after normalization, signed with headroom: ex + 1 after a carry, else ex - lzc.
    wire signed [7:0] e_norm = carry ? $signed({3'b000, ex}) + 8'sd1
                                     : $signed({3'b000, ex}) - $signed({4'd0, lzc});

    // ---- round to nearest even ---------------------------------------------------------
    wire          g = norm[2];
    wire          rs = norm[1] | norm[0];
    wire          round_up = g & (rs | norm[3]);
    wire [SW:0]   sig_r = {1'b0, norm[XW-1:3]} + {{SW{1'b0}}, round_up};
    wire          r_carry = sig_r[SW];
    wire signed [7:0] e_fin = e_norm + $signed({7'd0, r_carry});
    wire [MW-1:0] mant = r_carry ? {MW{1'b0}} : sig_r[MW-1:0];

    // ---- result selection ------------------------------------------------------------
    wire overflow = (e_fin > 8'sd30);
    wire underflow = (e_fin < 8'sd1);
    wire [15:0] finite_sum =
        is_zero   ? {sa & sb & a_zero & b_zero, 15'd0} :
        underflow ? 16'h0000 :
        overflow  ? {sx, MAX_MAG} :
                    {sx, e_fin[4:0], mant};

    wire any_nan = a_nan | b_nan | (a_inf & b_inf & (sa ^ sb));
    assign o_sum = any_nan ? NAN_BITS :
                   a_inf   ? i_a :
                   b_inf   ? i_b :
                   finite_sum;
endmodule

`default_nettype wire
