// dl_mac_lanes: the DeltaLLM broadcast MAC array, L lanes x M MACs (reference: the hybrid
// scores of coaccel.models.deltallm.hybrid_scores / delta_chain_scores and the PV update of the
// VSSOS step, docs/deltallm.md §2-3).
//
// Every cycle one operation broadcasts M (index, value) pairs to all lanes. The values are always
// chunk i_chunk of the held row i_row (D elements of RW bits, signed): row[i_chunk*M + m]. Lane l
// holds its query q_l (D x int8, one LUTRAM of D words per MAC read port) and:
//   exact score  E_l  (i_op = OP_EXACT): indices i_chunk*M + m, i_row = the key row;
//                E_l = (i_clear ? 0 : E_l) + sum_m q_l[idx_m] * row[idx_m]
//   delta chain  A_l  (i_op = OP_DELTA): indices = the M lowest set bits of i_mask (dl_prio_enc,
//                o_mask_rest returns the bits left, so a row with nnz stored deltas takes
//                ceil(nnz/M) cycles); i_row = the packed row (the stored values in index order,
//                coaccel.models.deltallm.pack_delta_rows) and i_chunk = the delta cycle c of the
//                row, so value m of cycle c is the delta of the m-th index;
//                A_l = (i_clear ? 0 : A_l) + sum_m q_l[idx_m] * packed[c*M + m]
//   i_load_chain with OP_EXACT: A_l = the new E_l as well (a dense row has khat_j = k_j, so the
//                chain q.khat_j restarts from the exact score)
//   output       o_l  (i_op = OP_PV): columns c = i_chunk*M + m of the value row;
//                o_l[c] = ((o_l[c] * alpha_l) >> 15) + p_l * v[c]   (floor shift; alpha_l =
//                32768 leaves o unchanged)
// One multiplier per MAC serves every operation: its operands are (q_l[idx_m], value m) for a
// score and (p_l, v[c]) for PV, 17 x RW bits signed (one DSP48E2); the o rescale o * alpha is a
// second, OW x 17-bit product per MAC.
// i_clear_o zeroes every o (start of a query block; o is held in one NC-word LUTRAM per lane,
// and a per-word flag makes a cleared word count as 0: scaled by alpha = 0 in PV, 0 on o_rd). Query load, element-major: i_q_we writes
// element i_q_elem of the M lanes of group i_q_group (lanes i_q_group*M + s, s = 0..M-1, from
// i_q_data[8*s +: 8]; lanes past L ignored), so a query block loads in D*ceil(L/M) cycles, one
// LUTRAM write per lane per cycle. Read port: o_rd = o[i_rd_lane][i_chunk*M +: M] (the
// operation's own chunk address: one LUTRAM read port per lane serves PV and the read-out)
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
    input  wire [$clog2(D > 1 ? D : 2)-1:0] i_q_elem,
    input  wire [$clog2(L > M ? (L + M - 1) / M : 2)-1:0] i_q_group,
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
    output wire [M*OW-1:0]       o_rd
);
    localparam integer IW = $clog2(D);
    localparam integer NC = D / M;
    localparam [1:0] OP_EXACT = 2'd0, OP_DELTA = 2'd1, OP_PV = 2'd2;

    wire [M*IW-1:0] d_idx;
    wire [M-1:0]    d_en;
    dl_prio_enc #(.D(D), .M(M), .IW(IW)) u_prio (
        .i_mask(i_mask), .o_idx(d_idx), .o_en(d_en), .o_rest(o_mask_rest)
    );
    // the M broadcast pairs: q index and row value (the row chunk i_chunk in every mode)
    wire [M*IW-1:0] idx;
    wire [M-1:0]    en;
    wire [M*RW-1:0] val = i_row[RW*M*i_chunk +: RW*M];
    genvar gm, gl;
    generate
        for (gm = 0; gm < M; gm = gm + 1) begin : g_pair
            assign idx[IW*gm +: IW] = (i_op == OP_DELTA) ? d_idx[IW*gm +: IW] : i_chunk * M + gm;
            assign en[gm] = (i_op == OP_DELTA) ? d_en[gm] : 1'b1;
        end
    endgenerate

    reg [L*NC-1:0] o_live;
    wire [L*SW-1:0] e_next, a_next;
    wire [L*M*OW-1:0] pv_new;
    wire [L*M*OW-1:0] o_rd_all;
    wire pv_we = i_valid && (i_op == OP_PV) && !i_clear_o;
    generate
        for (gl = 0; gl < L; gl = gl + 1) begin : g_lane
            reg [7:0] qm [0:D-1];
            always @(posedge i_clk)
                if (i_q_we && i_q_group == gl / M) qm[i_q_elem] <= i_q_data[8*(gl % M) +: 8];
            wire signed [16:0] a_pv = {1'b0, i_p[16*gl +: 16]};
            wire signed [RW+16:0] prod [0:M-1];
            for (gm = 0; gm < M; gm = gm + 1) begin : g_mac
                wire signed [7:0] q_sel = qm[idx[IW*gm +: IW]];
                wire signed [16:0] a_op = (i_op == OP_PV) ? a_pv : {{9{q_sel[7]}}, q_sel};
                assign prod[gm] = a_op * $signed(val[RW*gm +: RW]);
            end
            reg signed [SW-1:0] sum;
            integer m;
            always @(*) begin
                sum = 0;
                for (m = 0; m < M; m = m + 1)
                    if (en[m]) sum = sum + prod[m];
            end
            wire signed [SW-1:0] e_new = (i_clear ? 0 : $signed(o_exact[SW*gl +: SW])) + sum;
            assign e_next[SW*gl +: SW] = (i_op == OP_EXACT) ? e_new : o_exact[SW*gl +: SW];
            assign a_next[SW*gl +: SW] =
                (i_op == OP_DELTA) ? (i_clear ? 0 : $signed(o_chain[SW*gl +: SW])) + sum :
                (i_op == OP_EXACT && i_load_chain) ? e_new : o_chain[SW*gl +: SW];
            // o: LUTRAM words initialised to 0 (the FPGA loads the LUTs' INIT at configuration).
            // A word not written since i_clear_o is scaled by alpha = 0 instead of being
            // gated to 0 (17 gates per lane, not M*OW), so its old contents never reach o.
            reg [M*OW-1:0] om [0:NC-1];
            integer w;
            initial for (w = 0; w < NC; w = w + 1) om[w] = {M*OW{1'b0}};
            wire [M*OW-1:0] o_cur = om[i_chunk];
            wire signed [16:0] a_eff =
                o_live[NC*gl + i_chunk] ? $signed({1'b0, i_alpha[16*gl +: 16]}) : 17'sd0;
            assign o_rd_all[OW*M*gl +: OW*M] = o_cur;
            for (gm = 0; gm < M; gm = gm + 1) begin : g_pv
                wire signed [OW+17:0] scaled = $signed(o_cur[OW*gm +: OW]) * a_eff;
                assign pv_new[OW*(M*gl + gm) +: OW] = (scaled >>> 15) + prod[gm];
            end
            always @(posedge i_clk)
                if (pv_we) om[i_chunk] <= pv_new[OW*M*gl +: OW*M];
        end
    endgenerate

    integer l;
    always @(posedge i_clk) begin
        if (i_rst) begin
            o_live <= 0; o_exact <= 0; o_chain <= 0;
        end else begin
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
    assign o_exact_next = (i_valid && i_op != OP_PV) ? e_next : o_exact;
    assign o_chain_next = (i_valid && i_op != OP_PV) ? a_next : o_chain;
    // the read port: the selected lane's word, 0 if not written since i_clear_o
    assign o_rd = o_live[NC*i_rd_lane + i_chunk] ? o_rd_all[OW*M*i_rd_lane +: OW*M]
                                                    : {M*OW{1'b0}};
endmodule
