// dl_mac_lanes: the DeltaLLM broadcast MAC array, L lanes x M MACs (reference: the hybrid
// scores of coaccel.models.deltallm.hybrid_scores / delta_chain_scores and the PV update of the
// VSSOS step, docs/deltallm.md §2-3).
//
// Every cycle one operation broadcasts up to M (index, value) pairs from the held row i_row
// (D elements of RW bits, signed) to all lanes. Lane l holds its query q_l (D x int8) and:
//   exact score  E_l  (i_op = OP_EXACT): pairs = elements i_chunk*M .. +M-1 of the key row;
//                E_l = (i_clear ? 0 : E_l) + sum_m q_l[idx_m] * row[idx_m]
//   delta chain  A_l  (i_op = OP_DELTA): pairs = the M lowest set bits of i_mask (dl_prio_enc,
//                o_mask_rest returns the bits left, so a row with nnz stored deltas takes
//                ceil(nnz/M) cycles); A_l = (i_clear ? 0 : A_l) + sum_m q_l[idx_m] * row[idx_m]
//   i_load_chain with OP_EXACT: A_l = the new E_l as well (a dense row has khat_j = k_j, so the
//                chain q.khat_j restarts from the exact score)
//   output       o_l  (i_op = OP_PV): columns c = i_chunk*M + m of the value row;
//                o_l[c] = ((o_l[c] * alpha_l) >> 15) + p_l * v[c]   (floor shift; alpha_l =
//                32768 leaves o unchanged)
// i_clear_o zeroes every o (start of a query block; o is held in one NC-word memory per lane,
// and a per-word flag makes a cleared word read as 0). Query load: i_q_we writes M int8 elements
// i_q_data to lane i_q_lane, chunk i_q_chunk. Read port: o_rd = o[i_rd_lane][i_rd_chunk*M +: M]
// (combinational). All accumulator updates take effect at the edge that samples the operation
// (latency 1, one operation per cycle); o_exact_next / o_chain_next show the values they take at
// that edge (combinational).
module dl_mac_lanes #(
    parameter integer D  = 128,
    parameter integer L  = 16,
    parameter integer M  = 16,
    parameter integer RW = 9,
    parameter integer SW = 24,
    parameter integer OW = 40
) (
    input  wire                  i_clk,
    input  wire                  i_rst,
    input  wire                  i_q_we,
    input  wire [$clog2(L > 1 ? L : 2)-1:0] i_q_lane,
    input  wire [$clog2(D/M > 1 ? D/M : 2)-1:0] i_q_chunk,
    input  wire [M*8-1:0]        i_q_data,
    input  wire                  i_valid,
    input  wire [1:0]            i_op,
    input  wire                  i_clear,
    input  wire                  i_load_chain,
    input  wire [$clog2(D/M > 1 ? D/M : 2)-1:0] i_chunk,
    input  wire [D*RW-1:0]       i_row,
    input  wire [D-1:0]          i_mask,
    input  wire [L*16-1:0]       i_p,
    input  wire [L*16-1:0]       i_alpha,
    input  wire                  i_clear_o,
    output wire [D-1:0]          o_mask_rest,
    output reg  [L*SW-1:0]       o_exact,
    output reg  [L*SW-1:0]       o_chain,
    output wire [L*SW-1:0]       o_exact_next,
    output wire [L*SW-1:0]       o_chain_next,
    input  wire [$clog2(L > 1 ? L : 2)-1:0] i_rd_lane,
    input  wire [$clog2(D/M > 1 ? D/M : 2)-1:0] i_rd_chunk,
    output wire [M*OW-1:0]       o_rd
);
    localparam integer IW = $clog2(D);
    localparam [1:0] OP_EXACT = 2'd0, OP_DELTA = 2'd1, OP_PV = 2'd2;

    reg [L*D*8-1:0]  q;
    localparam integer NC = D / M;
    // o: one memory per lane of NC words (M elements each), written and read a chunk at a time
    // (LUTRAM-shaped); o_live marks the words written since the last i_clear_o, so a cleared or
    // reset accumulator reads as 0 without touching the memory.
    reg [L*NC-1:0] o_live;
    wire [L*M*OW-1:0] o_cur;        // the chunk i_chunk of every lane
    wire [L*M*OW-1:0] o_rd_all;     // the chunk i_rd_chunk of every lane

    // ---------------- pair selection ----------------
    wire [M*IW-1:0] d_idx;
    wire [M-1:0]    d_en;
    dl_prio_enc #(.D(D), .M(M), .IW(IW)) u_prio (
        .i_mask(i_mask), .o_idx(d_idx), .o_en(d_en), .o_rest(o_mask_rest)
    );
    reg [M*IW-1:0] idx;
    reg [M-1:0]    en;
    reg [M*RW-1:0] val;
    integer m, l;
    always @(*) begin
        for (m = 0; m < M; m = m + 1) begin
            if (i_op == OP_DELTA) begin
                idx[IW*m +: IW] = d_idx[IW*m +: IW];
                en[m] = d_en[m];
            end else begin
                idx[IW*m +: IW] = i_chunk * M + m;
                en[m] = 1'b1;
            end
            val[RW*m +: RW] = i_row[RW*idx[IW*m +: IW] +: RW];
        end
    end

    // ---------------- score MACs: L lanes x M products, adder tree ----------------
    reg signed [SW-1:0] sum, e_new;
    reg [L*SW-1:0] e_next, a_next;
    always @(*) begin
        for (l = 0; l < L; l = l + 1) begin
            sum = 0;
            for (m = 0; m < M; m = m + 1)
                if (en[m])
                    sum = sum + $signed(q[8*(D*l + idx[IW*m +: IW]) +: 8]) *
                                $signed(val[RW*m +: RW]);
            e_new = (i_clear ? 0 : $signed(o_exact[SW*l +: SW])) + sum;
            e_next[SW*l +: SW] = (i_op == OP_EXACT) ? e_new : o_exact[SW*l +: SW];
            a_next[SW*l +: SW] = (i_op == OP_DELTA) ?
                                    (i_clear ? 0 : $signed(o_chain[SW*l +: SW])) + sum :
                                 (i_op == OP_EXACT && i_load_chain) ? e_new :
                                    o_chain[SW*l +: SW];
        end
    end

    // ---------------- PV MACs: o = ((o * alpha) >> 15) + p * v ----------------
    reg signed [OW+17:0] scaled;
    reg [L*M*OW-1:0] pv_new;        // the M updated elements of every lane
    always @(*) begin
        for (l = 0; l < L; l = l + 1)
            for (m = 0; m < M; m = m + 1) begin
                scaled = $signed(o_cur[OW*(M*l + m) +: OW]) *
                         $signed({1'b0, i_alpha[16*l +: 16]});
                pv_new[OW*(M*l + m) +: OW] = (scaled >>> 15) +
                    $signed({1'b0, i_p[16*l +: 16]}) * $signed(val[RW*m +: RW]);
            end
    end

    wire pv_we = i_valid && (i_op == OP_PV) && !i_clear_o;
    genvar gl;
    generate
        for (gl = 0; gl < L; gl = gl + 1) begin : g_o
            reg [M*OW-1:0] mem [0:NC-1];
            always @(posedge i_clk)
                if (pv_we) mem[i_chunk] <= pv_new[OW*M*gl +: OW*M];
            assign o_cur[OW*M*gl +: OW*M] =
                o_live[NC*gl + i_chunk] ? mem[i_chunk] : {M*OW{1'b0}};
            assign o_rd_all[OW*M*gl +: OW*M] =
                o_live[NC*gl + i_rd_chunk] ? mem[i_rd_chunk] : {M*OW{1'b0}};
        end
    endgenerate

    always @(posedge i_clk) begin
        if (i_rst) begin
            q <= 0; o_live <= 0; o_exact <= 0; o_chain <= 0;
        end else begin
            if (i_q_we)
                q[8*(D*i_q_lane + M*i_q_chunk) +: 8*M] <= i_q_data;
            if (i_clear_o)
                o_live <= 0;
            else if (pv_we)
                for (l = 0; l < L; l = l + 1)
                    o_live[NC*l + i_chunk] <= 1'b1;
            if (i_valid && i_op != OP_PV) begin
                o_exact <= e_next;
                o_chain <= a_next;
            end
        end
    end

    // the accumulators as they will be after this cycle's operation (the attention top's score)
    assign o_exact_next = (i_valid && i_op != OP_PV) ? e_next : o_exact;
    assign o_chain_next = (i_valid && i_op != OP_PV) ? a_next : o_chain;
    assign o_rd = o_rd_all[OW*M*i_rd_lane +: OW*M];
endmodule
