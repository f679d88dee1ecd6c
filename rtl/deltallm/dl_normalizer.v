// dl_normalizer: the VSSOS final normalisation of L lanes (reference: the fixed-point output
// scaling of coaccel.models.deltallm, docs/deltallm.md §3):
//   r = floor(2^40 / max(l, 1)) for a lane that started (0 otherwise)
//   y = clamp_int16((o * r) >> 32)      (arithmetic shift; y is Q7.8 in INT8-v units)
//
// Reciprocals: i_start (with i_den [L*LW], i_started [L]) starts L restoring dividers in
// parallel, one quotient bit per cycle; o_busy is high for RB = 41 cycles, then o_recip holds
// the L reciprocals (RB bits each) until the next i_start. i_start while busy is ignored.
// Scaling: i_valid, i_lane, i_o [M*OW] (M signed o elements of lane i_lane) ->
// o_valid, o_y [M*16] one cycle later (M multipliers, initiation interval 1).
module dl_normalizer #(
    parameter integer L  = 16,
    parameter integer M  = 16,
    parameter integer LW = 32,
    parameter integer OW = 40
) (
    input  wire                  i_clk,
    input  wire                  i_rst,
    input  wire                  i_start,
    input  wire [L*LW-1:0]       i_den,
    input  wire [L-1:0]          i_started,
    output wire                  o_busy,
    output wire [L*41-1:0]       o_recip,
    input  wire                  i_valid,
    input  wire [$clog2(L > 1 ? L : 2)-1:0] i_lane,
    input  wire [M*OW-1:0]       i_o,
    output reg                   o_valid,
    output reg  [M*16-1:0]       o_y
);
    localparam integer RB = 41;                 // quotient bits of 2^40 / l
    localparam integer CB = $clog2(RB + 1);

    reg [CB-1:0]   count;                       // quotient bits left
    reg [L*LW-1:0] den;                         // max(l, 1), 0 for a lane that never started
    reg [L*(LW+1)-1:0] rem;
    reg [L*RB-1:0] quo;
    assign o_busy  = (count != 0);
    assign o_recip = quo;

    integer l, k;
    reg [LW:0]   r_next;
    reg [LW-1:0] dl;
    always @(posedge i_clk) begin
        if (i_rst) begin
            count <= 0; den <= 0; rem <= 0; quo <= 0;
        end else if (i_start && !o_busy) begin
            count <= RB;
            rem <= 0; quo <= 0;
            for (l = 0; l < L; l = l + 1) begin
                dl = i_den[LW*l +: LW];
                den[LW*l +: LW] <= !i_started[l] ? {LW{1'b0}} : (dl == 0 ? 1 : dl);
            end
        end else if (o_busy) begin
            count <= count - 1'b1;
            for (l = 0; l < L; l = l + 1) begin
                // dividend 2^40: its only one bit enters first (bit 40 of 41)
                r_next = {rem[(LW+1)*l +: LW], (count == RB) ? 1'b1 : 1'b0};
                if (den[LW*l +: LW] != 0 && r_next >= {1'b0, den[LW*l +: LW]}) begin
                    rem[(LW+1)*l +: LW+1] <= r_next - {1'b0, den[LW*l +: LW]};
                    quo[RB*l +: RB] <= {quo[RB*l +: RB-1], 1'b1};
                end else begin
                    rem[(LW+1)*l +: LW+1] <= r_next;
                    quo[RB*l +: RB] <= {quo[RB*l +: RB-1], 1'b0};
                end
            end
        end
    end

    reg signed [OW+RB:0] prod;
    reg signed [OW+RB:0] sh;
    reg [RB-1:0] r_sel;
    always @(posedge i_clk) begin
        if (i_rst) begin
            o_valid <= 0; o_y <= 0;
        end else begin
            o_valid <= i_valid;
            if (i_valid) begin
                r_sel = quo[RB*i_lane +: RB];
                for (k = 0; k < M; k = k + 1) begin
                    prod = $signed(i_o[OW*k +: OW]) * $signed({1'b0, r_sel});
                    sh = prod >>> 32;
                    o_y[16*k +: 16] <= (sh > 32767) ? 16'h7FFF :
                                       (sh < -32768) ? 16'h8000 : sh[15:0];
                end
            end
        end
    end
endmodule
