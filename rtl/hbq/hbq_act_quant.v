// hbq_act_quant: online HBQ-E activation quantizer, binary16 vector -> HBQ-E activation block
// (specs/hbq.md §1.6 "Hardware activation L2 rule", §2.3 hbq_e_quantizer; docs/hbq_format.md §4).
//
// Bit-exact with coaccel.models.formats.quantize(x, "hbq-e", role="activation", variant="asic",
// l2_select="threshold", block=B, ub=UB, rounding=..., scale_rounding=...) on binary16 inputs:
//   * L1 scale: E5M3 of the exact amax / 14, half up (or ceil), clipped to [2^-14, 61440]
//     (hbq_act_scale); an all-zero block gets 2^-14 and all-zero codes;
//   * L2 (1 bit, multipliers {1, 2}): micro-block j takes code 1 iff its largest |x| >= 7.5 * S1;
//   * elements: E2M2 of the exact x / (S1 * multiplier), half away from zero (or nearest even),
//     saturating at +-7; a zero magnitude is code 0 (hbq_act_elem).
//   Inf elements are left out of the scale and the L2 rule and take the +-max code (the
//   reference's nonfinite="saturate"); NaN is outside the contract (the reference raises).
//
// The boundary comparisons are exact integer comparisons (see hbq_act_elem): per block, the 15
// E2M2 boundaries 8*beta in {1,3,5,7,9,11,13,15,18,22,26,30,36,44,52} times D = 8 + M (the scale's
// significand in eighths), doubled for micro-blocks with L2 multiplier 2, and the L2 threshold
// 60 * D (7.5 in eighths).
//
// Handshake: valid-only, no back-pressure; one block per cycle (initiation interval 1).
// Pipeline (latency 2): stage 1 finds amax and the scale (registered with the block); stage 2
// applies the L2 rule and quantizes every element (registered outputs, o_valid).
// Reset: synchronous, active high; clears every register (no X on any output after reset).
//
// Parameters:
//   B              : L1 block length (elements per scale), 128
//   UB             : micro-block length (elements per L2 code), divides B; 32 for HBQ-E
//   ROUNDING       : element rounding, 0 = half away from zero (default), 1 = nearest even
//   SCALE_ROUNDING : E5M3 scale rounding, 0 = half up (default), 1 = ceil
// Ports:
//   i_valid / i_x  : input strobe and the B binary16 values (element g at [16*g +: 16])
//   o_valid        : outputs hold the block taken two cycles earlier
//   o_codes        : B E2M2 codes {s, e[1:0], m[1:0]}, element g at [5*g +: 5] (§1.9)
//   o_scale        : E5M3 scale code {E[4:0], M[2:0]}
//   o_l2           : B/UB L2 codes, micro-block j at bit j (1 = multiplier 2)
`default_nettype none

module hbq_act_quant #(
    parameter integer B = 128,
    parameter integer UB = 32,
    parameter integer ROUNDING = 0,
    parameter integer SCALE_ROUNDING = 0
) (
    input  wire              i_clk,
    input  wire              i_rst,
    input  wire              i_valid,
    input  wire [16*B-1:0]   i_x,
    output reg               o_valid,
    output reg  [5*B-1:0]    o_codes,
    output reg  [7:0]        o_scale,
    output reg  [B/UB-1:0]   o_l2
);
    localparam integer NUB = B / UB;
    localparam integer TW = 12;  // thresholds up to 2 * 52 * 15 = 1560
    // E2M2 rounding boundaries in eighths (0.125, 0.375, ..., 6.5).
    localparam [15*8-1:0] BETA8 = {8'd52, 8'd44, 8'd36, 8'd30, 8'd26, 8'd22, 8'd18, 8'd15,
                                   8'd13, 8'd11, 8'd9, 8'd7, 8'd5, 8'd3, 8'd1};
    localparam [TW-1:0] L2_BETA8 = 60;  // 7.5 in eighths

    generate
        if (B % UB != 0 || B < 1 || UB < 1 || ROUNDING < 0 || ROUNDING > 1 ||
            SCALE_ROUNDING < 0 || SCALE_ROUNDING > 1) begin : g_bad_parameter
            hbq_act_quant_unsupported_parameter u_error ();
        end
    endgenerate

    // ---- stage 1: largest finite magnitude -> E5M3 scale ---------------------------------
    reg [14:0] amax;
    integer i;
    always @* begin
        amax = 15'd0;
        for (i = 0; i < B; i = i + 1)
            if (i_x[16*i+10 +: 5] != 5'd31 && i_x[16*i +: 15] > amax) amax = i_x[16*i +: 15];
    end
    wire [7:0] scale;
    hbq_act_scale #(.SCALE_ROUNDING(SCALE_ROUNDING)) u_scale (
        .i_amax(amax),
        .o_scale(scale)
    );

    reg            r1_valid;
    reg [16*B-1:0] r1_x;
    reg [7:0]      r1_scale;
    always @(posedge i_clk) begin
        if (i_rst) begin
            r1_valid <= 1'b0;
            r1_x <= {16*B{1'b0}};
            r1_scale <= 8'd0;
        end else begin
            r1_valid <= i_valid;
            if (i_valid) begin
                r1_x <= i_x;
                r1_scale <= scale;
            end
        end
    end

    // ---- stage 2: block thresholds, L2 rule, element codes --------------------------------
    wire [3:0] d = {1'b1, r1_scale[2:0]};  // significand in eighths, 8..15
    wire [15*TW-1:0] thr1;                  // thresholds at L2 multiplier 1
    wire [15*TW-1:0] thr2;                  // ... and 2
    wire [TW-1:0]    thr_l2 = L2_BETA8 * {{(TW - 4){1'b0}}, d};
    genvar k, j, g;
    generate
        for (k = 0; k < 15; k = k + 1) begin : g_thr
            assign thr1[TW*k +: TW] = {{(TW - 8){1'b0}}, BETA8[8*k +: 8]} * {{(TW - 4){1'b0}}, d};
            assign thr2[TW*k +: TW] = {thr1[TW*k +: TW-1], 1'b0};
        end
    endgenerate

    wire [B-1:0]   big;
    wire [NUB-1:0] l2;
    wire [5*B-1:0] codes;
    generate
        for (j = 0; j < NUB; j = j + 1) begin : g_ub
            assign l2[j] = |big[UB*j +: UB];
            wire [15*TW-1:0] thr = l2[j] ? thr2 : thr1;
            for (g = UB * j; g < UB * (j + 1); g = g + 1) begin : g_elem
                hbq_act_elem #(.ROUNDING(ROUNDING), .TW(TW)) u_elem (
                    .i_x(r1_x[16*g +: 16]),
                    .i_e_scale(r1_scale[7:3]),
                    .i_thr(thr),
                    .i_thr_l2(thr_l2),
                    .o_code(codes[5*g +: 5]),
                    .o_big(big[g])
                );
            end
        end
    endgenerate

    always @(posedge i_clk) begin
        if (i_rst) begin
            o_valid <= 1'b0;
            o_codes <= {5*B{1'b0}};
            o_scale <= 8'd0;
            o_l2 <= {NUB{1'b0}};
        end else begin
            o_valid <= r1_valid;
            if (r1_valid) begin
                o_codes <= codes;
                o_scale <= r1_scale;
                o_l2 <= l2;
            end
        end
    end
endmodule

`default_nettype wire
