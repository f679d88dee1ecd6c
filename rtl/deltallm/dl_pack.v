// dl_pack: front-packs the stored elements of a delta row in index order (the Delta buffer's
// stored form; reference: coaccel.models.deltallm.pack_delta_rows). Combinational.
//
//   i_mask [D]        1 = stored element
//   i_data [D*DW]     element c at [DW*c +: DW] (read only where i_mask[c] is set)
//   o_packed [D*DW]   slot s holds the element of the s-th lowest set bit of i_mask;
//                     slots s >= popcount(i_mask) are 0
//
// A compaction network rather than a D x D selector (which would need D wide D:1 multiplexers):
//   1. prefix count: z_c = number of elements below c that are NOT stored, so a stored element
//      c belongs in slot c - z_c;
//   2. log2(D) stages, k = 0 (LSB) first: an element whose count has bit k set moves down by 2^k,
//      carrying its count; each slot is a 2:1 choice between the element staying in it and the
//      one arriving from 2^k above, and a slot that neither claims becomes 0 (the tail, and every
//      slot a moving element left behind).
//
// Why LSB first never collides: after stages 0 .. k-1 a stored element c sits at
// c - (z_c mod 2^k). For stored elements i < j, the indices i .. j-1 take in i itself and the
// z_j - z_i non-stored elements between them, so j - i >= 1 + (z_j - z_i); and because
// z_j >= z_i, (z_j mod 2^k) - (z_i mod 2^k) <= z_j - z_i. So their positions differ by at least
// 1 after every stage and stay in index order: no slot is ever claimed twice, and the final
// positions c - z_c (the number of stored elements below c) are exactly the packed slots.
// (MSB first has no such bound: with D = 4 and i_mask = 4'b1010, element 3 (z = 2) moves by 2
// onto element 1 (z = 1), which stays, in the first stage.)
//
// Cost: D counters of log2(D) bits in a running sum, then log2(D) x D two-input multiplexers of
// DW + log2(D) + 1 bits (data, count, occupied).
module dl_pack #(
    parameter integer D  = 128,
    parameter integer DW = 9
) (
    input  wire [D-1:0]    i_mask,
    input  wire [D*DW-1:0] i_data,
    output reg  [D*DW-1:0] o_packed
);
    localparam integer S = $clog2(D);  // stages; every count z_c <= D - 1 fits S bits

    integer c, k;
    reg [S-1:0]    z;          // running count of non-stored elements
    reg [D-1:0]    occ, occ_n; // slot holds a stored element
    reg [D*S-1:0]  cnt, cnt_n; // that element's count z
    reg [D*DW-1:0] val, val_n; // that element's value
    reg            stay, come;
    reg [S-1:0]    cnt_up;     // count and value of the element 2^k slots above
    reg [DW-1:0]   val_up;
    always @(*) begin
        z = 0;
        for (c = 0; c < D; c = c + 1) begin
            occ[c] = i_mask[c];
            cnt[S*c +: S] = z;
            val[DW*c +: DW] = i_mask[c] ? i_data[DW*c +: DW] : {DW{1'b0}};
            z = z + !i_mask[c];
        end
        for (k = 0; k < S; k = k + 1) begin
            for (c = 0; c < D; c = c + 1) begin
                stay = occ[c] && !cnt[S*c + k];
                come = 1'b0;
                cnt_up = {S{1'b0}};
                val_up = {DW{1'b0}};
                if (c + (1 << k) < D) begin
                    come = occ[c + (1 << k)] && cnt[S*(c + (1 << k)) + k];
                    cnt_up = cnt[S*(c + (1 << k)) +: S];
                    val_up = val[DW*(c + (1 << k)) +: DW];
                end
                // at most one of stay / come holds (see above); neither: the slot becomes 0
                occ_n[c] = stay || come;
                cnt_n[S*c +: S] = ({S{stay}} & cnt[S*c +: S]) | ({S{come}} & cnt_up);
                val_n[DW*c +: DW] = ({DW{stay}} & val[DW*c +: DW]) | ({DW{come}} & val_up);
            end
            occ = occ_n;
            cnt = cnt_n;
            val = val_n;
        end
        o_packed = val;
    end
endmodule
