// dl_prio_enc: picks the M lowest set bits of a D-bit mask (the Delta-Key bitmask decoder of the
// broadcast MAC lanes). Combinational.
//
//   o_idx [M*IW]: index of the m-th lowest set bit (m = 0 lowest) at [IW*m +: IW]
//   o_en  [M]   : 1 where such a bit exists
//   o_rest [D]  : i_mask with those (up to M) bits cleared; the caller feeds it back next cycle,
//                 so a row with nnz stored elements takes ceil(nnz / M) cycles.
module dl_prio_enc #(
    parameter integer D = 128,
    parameter integer M = 16,
    parameter integer IW = $clog2(D)
) (
    input  wire [D-1:0]    i_mask,
    output reg  [M*IW-1:0] o_idx,
    output reg  [M-1:0]    o_en,
    output reg  [D-1:0]    o_rest
);
    integer m, b;
    reg [D-1:0] rem;
    reg         found;
    always @(*) begin
        rem = i_mask;
        o_idx = 0;
        o_en = 0;
        for (m = 0; m < M; m = m + 1) begin
            found = 1'b0;
            for (b = 0; b < D; b = b + 1) begin
                if (!found && rem[b]) begin
                    o_idx[IW*m +: IW] = b;
                    found = 1'b1;
                end
            end
            o_en[m] = found;
            rem = rem & (rem - 1'b1);  // clear the lowest set bit
        end
        o_rest = rem;
    end
endmodule
