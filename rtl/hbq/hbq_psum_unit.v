// hbq_psum_unit: partial-sum accumulate of one MXINT8 block of SA_N output channels
// (specs/hbq.md §2.2, psum_mode "mxint8_running").
//
// One read-modify-write per accepted input: the old MXINT8 block read from the PSUM buffer is
// dequantized to binary16 (hbq_mxint8_dequant; forced to +0 on the first pass, i_first), added to
// the SA_N new binary16 partial sums with SA_N hbq_fp16_add adders, and the sums are requantized
// (hbq_mxint8_quant) for the write-back. Bit-exact with one K step of
// coaccel.models.hbq.accumulate_psums(..., psum_mode="mxint8_running", sa_n=SA_N).
//
// Handshake: valid-only, no back-pressure. An input is taken on every rising clock edge with
// i_valid = 1 (initiation interval 1). Pipeline (latency 2 cycles):
//   stage 1: dequantize + add; the sums are registered -> o_sum, qualified by o_sum_valid
//            (one cycle after the input);
//   stage 2: requantize; q and X are registered -> o_q, o_x, qualified by o_valid
//            (two cycles after the input).
// The caller must not read a buffer word whose write-back is still in flight (two cycles).
// Reset is synchronous and active high; it clears every output register (no X after reset).
//
// Parameters:
//   SA_N     : output channels per MXINT8 block (16 in the accelerator)
//   ROUNDING : MXINT8 element rounding, 0 = nearest even (default), 1 = truncate toward zero
// Ports:
//   i_valid     : input strobe
//   i_first     : first K block of this output tile: the old value is 0 (i_old_* ignored)
//   i_old_q     : old block elements (int8, element i at [8*i +: 8])
//   i_old_x     : old block shared exponent code (X + 127)
//   i_psum      : new binary16 partial sums (value i at [16*i +: 16]); finite
//   o_sum_valid : o_sum holds the binary16 sums of the input accepted one cycle earlier
//   o_sum       : the binary16 sums (old + new), before requantization
//   o_valid     : o_q / o_x hold the requantized block of the input accepted two cycles earlier
//   o_q, o_x    : the new MXINT8 block to write back
`default_nettype none

module hbq_psum_unit #(
    parameter integer SA_N = 16,
    parameter integer ROUNDING = 0
) (
    input  wire               i_clk,
    input  wire               i_rst,
    input  wire               i_valid,
    input  wire               i_first,
    input  wire [8*SA_N-1:0]  i_old_q,
    input  wire [7:0]         i_old_x,
    input  wire [16*SA_N-1:0] i_psum,
    output reg                o_sum_valid,
    output reg  [16*SA_N-1:0] o_sum,
    output reg                o_valid,
    output reg  [8*SA_N-1:0]  o_q,
    output reg  [7:0]         o_x
);
    // ---- stage 1: dequantize the old block, add the new partial sums ------------------------
    wire [16*SA_N-1:0] old_fp16;
    hbq_mxint8_dequant #(.N(SA_N)) u_dequant (
        .i_q(i_old_q),
        .i_x(i_old_x),
        .o_fp16(old_fp16)
    );
    // First pass: the buffer word has never been written, so the old value is +0.
    wire [16*SA_N-1:0] old_sel = i_first ? {16*SA_N{1'b0}} : old_fp16;

    wire [16*SA_N-1:0] sum;
    genvar g;
    generate
        for (g = 0; g < SA_N; g = g + 1) begin : g_add
            hbq_fp16_add u_add (
                .i_a(old_sel[16*g +: 16]),
                .i_b(i_psum[16*g +: 16]),
                .o_sum(sum[16*g +: 16])
            );
        end
    endgenerate

    always @(posedge i_clk) begin
        if (i_rst) begin
            o_sum_valid <= 1'b0;
            o_sum <= {16*SA_N{1'b0}};
        end else begin
            o_sum_valid <= i_valid;
            if (i_valid) o_sum <= sum;
        end
    end

    // ---- stage 2: requantize ----------------------------------------------------------------
    wire [8*SA_N-1:0] q_new;
    wire [7:0]        x_new;
    hbq_mxint8_quant #(.N(SA_N), .ROUNDING(ROUNDING)) u_quant (
        .i_v(o_sum),
        .o_q(q_new),
        .o_x(x_new)
    );

    always @(posedge i_clk) begin
        if (i_rst) begin
            o_valid <= 1'b0;
            o_q <= {8*SA_N{1'b0}};
            o_x <= 8'd0;
        end else begin
            o_valid <= o_sum_valid;
            if (o_sum_valid) begin
                o_q <= q_new;
                o_x <= x_new;
            end
        end
    end
endmodule

`default_nettype wire
