// dl_delta_encoder: the DeltaLLM Delta-Key encoder, one post-RoPE int8 key row per cycle
// (reference: coaccel.models.deltallm.encode_delta_row / encode_delta_keys, fixed mode).
//
// Per element c of row t:
//   memory form (i_naive = 0): e = k_t[c] - khat_{t-1}[c]
//   naive form  (i_naive = 1): e = k_t[c] - k_{t-1}[c]
//   keep = |e| >= theta;  delta = keep ? e : 0;  khat_t[c] = khat_{t-1}[c] + delta
// A dense row (i_dense: a sink or a refresh row) keeps every element with
// delta = k_t - khat_{t-1}, which resets the memory to k_t. i_first starts a new sequence:
// the memory and the previous key read as 0 and the row is dense, so delta_0 = k_0.
//
// Ports (element c of a row at [W*c +: W]):
//   i_valid, i_first, i_dense, i_key [D*8] (int8)  -- one row per cycle, no back-pressure
//   i_theta [TW] (unsigned key LSBs), i_naive      -- held while a sequence streams
//   o_valid, o_mask [D] (1 = stored element), o_delta [D*DW] (signed, 0 where not stored),
//   o_khat [D*MW] (signed reconstruction khat_t), o_nnz (number of stored elements),
//   o_packed [D*DW] (the stored deltas front-packed in index order, 0 from slot o_nnz on)
// Latency 1 (the outputs are registered with the memory update), initiation interval 1.
//
// o_packed is the row as the Delta buffer stores it (reference: pack_delta_rows): the bitmask
// plus only the nnz kept values, slot s holding the element of the s-th lowest set bit, which
// is the order in which the MAC lanes' priority encoder (dl_prio_enc) consumes them, M per
// cycle. The compaction network (dl_pack: a prefix count and log2(D) shift stages) works on
// this cycle's mask and deltas, in the same cycle as the rest of the encoder.
// Contract: the memory form needs DW >= 9 and MW >= 8 for any int8 keys; the naive form's
// reconstruction drifts, so it is exact while |khat| < 2^(MW-1) and every delta fits DW.
module dl_delta_encoder #(
    parameter integer D  = 128,
    parameter integer DW = 9,
    parameter integer MW = 8,
    parameter integer TW = 9
) (
    input  wire                 i_clk,
    input  wire                 i_rst,
    input  wire                 i_valid,
    input  wire                 i_first,
    input  wire                 i_dense,
    input  wire [D*8-1:0]       i_key,
    input  wire [TW-1:0]        i_theta,
    input  wire                 i_naive,
    output reg                  o_valid,
    output reg  [D-1:0]         o_mask,
    output reg  [D*DW-1:0]      o_delta,
    output reg  [D*MW-1:0]      o_khat,
    output reg  [$clog2(D+1)-1:0] o_nnz,
    output reg  [D*DW-1:0]      o_packed
);
    // Internal arithmetic width: holds k - khat and k - k_prev for any MW.
    localparam integer AW = (MW > 8 ? MW : 8) + 2;

    reg [D*MW-1:0] mem;    // khat_{t-1}
    reg [D*8-1:0]  prev;   // k_{t-1}

    reg [D-1:0]        keep;
    reg [D*DW-1:0]     delta;
    reg [D*MW-1:0]     khat;
    reg [$clog2(D+1)-1:0] nnz;
    wire [D*DW-1:0]    packed_row;

    integer c;
    reg signed [AW-1:0] k, m, p, e_mem, e_ref, mag;
    always @(*) begin
        nnz = 0;
        for (c = 0; c < D; c = c + 1) begin
            k = $signed(i_key[8*c +: 8]);
            // separate assignments keep the sign extension (a ?: with an unsigned arm would not)
            m = $signed(mem[MW*c +: MW]);
            p = $signed(prev[8*c +: 8]);
            if (i_first) begin
                m = 0;
                p = 0;
            end
            e_mem = k - m;
            e_ref = i_naive ? (k - p) : e_mem;
            mag = e_ref[AW-1] ? -e_ref : e_ref;
            keep[c] = i_first || i_dense || (mag >= $signed({{(AW-TW){1'b0}}, i_theta}));
            // a dense row stores k - khat (memory reset); a sparse row stores the kept e
            delta[DW*c +: DW] = !keep[c] ? {DW{1'b0}} :
                                (i_first || i_dense) ? e_mem[DW-1:0] : e_ref[DW-1:0];
            khat[MW*c +: MW] = m[MW-1:0] + (!keep[c] ? {MW{1'b0}} :
                                (i_first || i_dense) ? e_mem[MW-1:0] : e_ref[MW-1:0]);
            nnz = nnz + keep[c];
        end
    end

    dl_pack #(
        .D (D),
        .DW(DW)
    ) u_pack (
        .i_mask  (keep),
        .i_data  (delta),
        .o_packed(packed_row)
    );

    always @(posedge i_clk) begin
        if (i_rst) begin
            o_valid <= 1'b0;
            o_mask  <= {D{1'b0}};
            o_delta <= {D*DW{1'b0}};
            o_khat  <= {D*MW{1'b0}};
            o_nnz   <= 0;
            o_packed <= {D*DW{1'b0}};
            mem     <= {D*MW{1'b0}};
            prev    <= {D*8{1'b0}};
        end else begin
            o_valid <= i_valid;
            if (i_valid) begin
                o_mask  <= keep;
                o_delta <= delta;
                o_khat  <= khat;
                o_nnz   <= nnz;
                o_packed <= packed_row;
                mem     <= khat;
                prev    <= i_key;
            end
        end
    end
endmodule
