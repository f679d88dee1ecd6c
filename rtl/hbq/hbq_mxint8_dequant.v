// hbq_mxint8_dequant: MXINT8 block -> binary16 values (specs/hbq.md §2.2).
//
// Combinational; bit-exact with coaccel.models.hbq.mxint8_dequantize(q, x_code, block=N):
// value_i = q_i * 2^X with X = i_x - 127, rounded to binary16 by the HBQ policy. |q| <= 128 has
// at most 8 significant bits, so the value is exact; a result above 65504 saturates to
// +-65504 and one below 2^-14 (or q = 0) is +0.
//
// With L = bit length of |q| (1..8), the binary16 biased exponent is X + (L - 1) + 15
// = i_x + L - 113 and the mantissa is |q| left-aligned below its leading one.
//
// Parameters:
//   N : values per block (SA_N)
// Ports:
//   i_q    : N int8 elements, element i at bits [8*i +: 8]
//   i_x    : shared exponent code (X + 127)
//   o_fp16 : N binary16 values, value i at bits [16*i +: 16]
`default_nettype none

module hbq_mxint8_dequant #(
    parameter integer N = 16
) (
    input  wire [8*N-1:0]  i_q,
    input  wire [7:0]      i_x,
    output reg  [16*N-1:0] o_fp16
);
    localparam [10:0] E_OFFSET = 11'd113;  // 127 - 15 + 1: biased exponent = i_x + L - E_OFFSET

    reg        neg;
    reg  [7:0] qv;
    reg  [7:0] mag;        // |q| <= 128 fits 8 bits
    reg  [3:0] len;
    reg  [7:0] aligned;    // mag shifted so that its leading one is bit 7
    reg signed [10:0] biased;
    integer i;
    integer k;
    always @* begin
        o_fp16 = {16*N{1'b0}};
        for (i = 0; i < N; i = i + 1) begin
            qv = i_q[8*i +: 8];
            neg = qv[7];
            mag = neg ? (~qv + 8'd1) : qv;
            len = 4'd0;
            for (k = 0; k < 8; k = k + 1)
                if (mag[k]) len = k[3:0] + 4'd1;
            aligned = mag << (4'd8 - len);
            // 11-bit two's complement: i_x + L - 113 lies in -113 .. 150.
            biased = {3'b000, i_x} + {7'd0, len} - E_OFFSET;
            if (mag == 8'd0 || biased < 11'sd1)
                o_fp16[16*i +: 16] = 16'h0000;
            else if (biased > 11'sd30)
                o_fp16[16*i +: 16] = {neg, 15'h7BFF};
            else
                o_fp16[16*i +: 16] = {neg, biased[4:0], aligned[6:0], 3'b000};
        end
    end
endmodule

`default_nettype wire
