// hbq_mxint8_quant: binary16 block -> MXINT8 block (partial-sum buffer format, specs/hbq.md §2.2).
//
// Combinational; bit-exact with coaccel.models.hbq.mxint8_quantize(v, block=N, rounding=...):
//   * subnormal inputs count as zero (the datapath flushes them);
//   * shared exponent X = max_i floor(log2|v_i|) - 6, stored E8M0-style as o_x = X + 127; for a
//     binary16 input with biased exponent e, floor(log2|v|) = e - 15, so o_x = max_i e_i + 106;
//     an all-zero block gets the sentinel o_x = 0 (X = -127) and q = 0;
//   * q_i = clamp(round(v_i / 2^X), -127, 127): the 11-bit significand shifted right by
//     4 + (e_max - e_i), rounded to nearest even (ROUNDING = 0) or truncated toward zero on the
//     magnitude (ROUNDING = 1), the sign applied afterwards (two's complement).
// Inf/NaN inputs (exponent 31) are outside the contract (the reference raises; the accumulator
// saturates and never produces them).
//
// Parameters:
//   N        : values per block (SA_N, 16 in the accelerator)
//   ROUNDING : 0 = round to nearest even, 1 = truncate toward zero
// Ports:
//   i_v : N binary16 values, value i at bits [16*i +: 16]
//   o_q : N int8 elements, element i at bits [8*i +: 8]
//   o_x : shared exponent code (X + 127)
`default_nettype none

module hbq_mxint8_quant #(
    parameter integer N = 16,
    parameter integer ROUNDING = 0
) (
    input  wire [16*N-1:0] i_v,
    output wire [8*N-1:0]  o_q,
    output wire [7:0]      o_x
);
    localparam integer SW = 11;              // binary16 significand with hidden bit
    localparam integer QMAX = 127;           // symmetric int8 range
    localparam integer X_OFFSET = 127 - 15 - 6;  // o_x = e_max + X_OFFSET

    // Largest biased exponent of the normal inputs (0 when every input is zero or subnormal).
    reg [4:0] e_max;
    integer i;
    always @* begin
        e_max = 5'd0;
        for (i = 0; i < N; i = i + 1)
            if (i_v[16*i+10 +: 5] > e_max) e_max = i_v[16*i+10 +: 5];
    end
    assign o_x = (e_max == 5'd0) ? 8'd0 : ({3'b000, e_max} + X_OFFSET[7:0]);

    // Per element: |q| = round(sig / 2^(4 + e_max - e)). One right shift of {sig, SW zeros}
    // puts the integer part in the upper SW bits and the dropped bits below: the guard bit on
    // top, the sticky bits under it (a shift of 2*SW or more drops everything: q = 0).
    genvar g;
    generate
        for (g = 0; g < N; g = g + 1) begin : g_elem
            wire [4:0]      e = i_v[16*g+10 +: 5];
            wire [SW-1:0]   sig = (e == 5'd0) ? {SW{1'b0}} : {1'b1, i_v[16*g +: 10]};
            wire [5:0]      sh = {1'b0, e_max - e} + 6'd4;
            wire [2*SW-1:0] t = {sig, {SW{1'b0}}} >> sh;
            wire [SW-1:0]   kept = t[2*SW-1:SW];  // <= 127: the shift is at least 4
            wire            guard = t[SW-1];
            wire            sticky = |t[SW-2:0];
            wire            up = (ROUNDING == 0) & guard & (sticky | kept[0]);
            wire [7:0]      mag = kept[7:0] + {7'd0, up};  // 128 only when kept = 127
            wire [7:0]      mag_c = (mag > QMAX[7:0]) ? QMAX[7:0] : mag;
            assign o_q[8*g +: 8] = i_v[16*g+15] ? (~mag_c + 8'd1) : mag_c;
        end
    endgenerate
endmodule

`default_nettype wire
