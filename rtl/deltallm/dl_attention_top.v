// dl_attention_top: DeltaLLM attention of one KV head and one query block, end to end
// (reference: coaccel.models.deltallm.attention, fixed mode, ascending column order).
//
// Lanes: lane l = g*PQ + p holds query head g of the group (G = L / PQ) at token i0 + p; lanes
// with p >= i_n_tok are padding (never valid, output 0). Columns j = 0 .. i_last = i0+n_tok-1:
//   lane l valid  : j <= tok_l;    exact: valid && (j < i_n_sink || tok_l - j < i_window)
//   delta         : valid && !exact (score = the delta chain q . khat_j)
// Schedule (one operation per cycle on the shared L x M MAC array, dl_mac_lanes):
//   q load          : D*ceil(L/M) cycles (= L*D/M when M divides L), one q beat per cycle
//   column j        : D/M exact cycles if any lane is exact (the key row), then ceil(nnz_j/M)
//                     delta cycles if any lane is delta (the bitmask row); the softmax step of
//                     column j (dl_softmax_state, PIPE = 0) runs in the cycle that produces the
//                     last score, or in a cycle of its own when the column has no MAC work;
//                     then D/M PV cycles unless the column is skipped. A column therefore takes
//                     max(1, qk_j + pv_j) cycles, the cycle model of docs/deltallm.md.
//   normalise       : 1 start cycle + 41 reciprocal cycles (dl_normalizer), then L*D/M output
//                     beats (M int16 Q7.8 each), lane-major.
// Streams (valid/ready, a beat moves when both are high; every source may stall):
//   q  : i_q_valid / o_q_ready / i_q_data [M*8]           D*ceil(L/M) beats, element-major:
//                                                         beat (grp, i) = element i of lanes
//                                                         grp*M .. grp*M+M-1, grp outer
//   k  : i_k_valid / o_k_ready / i_k_data [D*8]           one row per column with an exact lane
//   dl : i_dl_valid / o_dl_ready / i_dl_mask [D] / i_dl_data [D*9]
//                                                         one row per column with a delta lane:
//                                                         the bitmask and the stored deltas
//                                                         packed in index order (the Δ buffer
//                                                         form, pack_delta_rows)
//   v  : i_v_valid / o_v_ready / i_v_data [D*8]           one row per column 0 .. i_last (rows of
//                                                         skipped columns are passed over unread)
//   y  : o_y_valid / i_y_ready / o_y_data [M*16]          L*D/M beats, lane-major
// Control: i_start (sampled while !o_busy) with the block configuration held until o_done:
//   i_i0, i_n_tok (1..PQ), i_window (>= 1), i_n_sink (>= 1), i_mant/i_sh (per lane), i_tau_e,
//   i_no_skip, i_denom_kept. o_done pulses with the last output beat.
module dl_attention_top #(
    parameter integer D   = 128,
    parameter integer L   = 16,
    parameter integer M   = 16,
    parameter integer PQ  = 4,
    parameter integer TB  = 12,
    parameter integer SW  = 24,
    parameter integer CW  = 24,
    parameter integer SHW = 6,
    parameter integer EW  = 12,
    parameter integer TW  = 13,
    parameter integer LW  = 32,
    parameter integer OW  = 40
) (
    input  wire              i_clk,
    input  wire              i_rst,
    input  wire              i_start,
    input  wire [TB-1:0]     i_i0,
    input  wire [TB-1:0]     i_n_tok,
    input  wire [TB-1:0]     i_window,
    input  wire [TB-1:0]     i_n_sink,
    input  wire [L*CW-1:0]   i_mant,
    input  wire [L*SHW-1:0]  i_sh,
    input  wire [TW-1:0]     i_tau_e,
    input  wire              i_no_skip,
    input  wire              i_denom_kept,
    output wire              o_busy,
    output reg               o_done,
    input  wire              i_q_valid,
    output reg               o_q_ready,
    input  wire [M*8-1:0]    i_q_data,
    input  wire              i_k_valid,
    output reg               o_k_ready,
    input  wire [D*8-1:0]    i_k_data,
    input  wire              i_dl_valid,
    output reg               o_dl_ready,
    input  wire [D-1:0]      i_dl_mask,
    input  wire [D*9-1:0]    i_dl_data,
    input  wire              i_v_valid,
    output reg               o_v_ready,
    input  wire [D*8-1:0]    i_v_data,
    output reg               o_y_valid,
    input  wire              i_y_ready,
    output wire [M*16-1:0]   o_y_data
);
    localparam integer NC = D / M;
    localparam integer LB = $clog2(L > 1 ? L : 2);
    localparam integer CB = $clog2(NC > 1 ? NC : 2);
    localparam integer IW = $clog2(D > 1 ? D : 2);
    localparam integer LG = (L + M - 1) / M;       // lane groups of the element-major q load
    localparam integer GB = $clog2(LG > 1 ? LG : 2);
    localparam [1:0] OP_EXACT = 2'd0, OP_DELTA = 2'd1, OP_PV = 2'd2;
    localparam [3:0] S_IDLE = 4'd0, S_Q = 4'd1, S_EX = 4'd2, S_DE = 4'd3, S_PV = 4'd4,
                     S_RECIP = 4'd5, S_WAIT = 4'd6, S_OUT = 4'd7, S_DRAIN = 4'd8;

    reg [3:0]    state;
    reg [TB-1:0] j;            // current column
    reg [CB-1:0] chunk;
    reg [LB-1:0] lane;
    reg [IW-1:0] q_elem;       // q load: element and lane group of the next beat
    reg [GB-1:0] q_grp;
    reg          de_first;     // the next delta cycle reads the row's own bitmask
    reg [D-1:0]  rem;          // bitmask bits not yet consumed
    reg [TB:0]   v_drop;       // value rows of skipped columns still to pass over
    reg [L*16-1:0] p_reg, a_reg;
    assign o_busy = (state != S_IDLE);

    wire [TB-1:0] i_last = i_i0 + i_n_tok - 1'b1;

    // ---------------- lane regions of columns j and j + 1 ----------------
    reg [2*L-1:0] reg_j, reg_j1;   // {exact[L], valid[L]}
    integer l2;
    reg [TB-1:0] tok, j1;
    reg ok;
    always @(*) begin
        j1 = j + 1'b1;
        for (l2 = 0; l2 < L; l2 = l2 + 1) begin
            ok  = (l2 % PQ) < i_n_tok;
            tok = i_i0 + (l2 % PQ);
            reg_j[l2]      = ok && (j <= tok);
            reg_j[L + l2]  = ok && (j <= tok) && ((j < i_n_sink) || (tok - j < i_window));
            reg_j1[l2]     = ok && (j1 <= tok);
            reg_j1[L + l2] = ok && (j1 <= tok) && ((j1 < i_n_sink) || (tok - j1 < i_window));
        end
    end
    wire [L-1:0] valid_j = reg_j[L-1:0];
    wire [L-1:0] exact_j = reg_j[2*L-1:L];
    wire ex_any_j  = |exact_j;
    wire de_any_j  = |(valid_j & ~exact_j);
    wire ex_any_j1 = |reg_j1[2*L-1:L];
    wire sink_j    = (j < i_n_sink);
    wire last_col  = (j == i_last);

    // ---------------- datapath ----------------
    reg          mac_valid, mac_clear, mac_load_chain, q_we, clear_o;
    reg [1:0]    mac_op;
    reg [CB-1:0] mac_chunk;
    reg [D*9-1:0] mac_row;
    reg [D-1:0]  mac_mask;
    reg          pv_comb;      // PV in the update cycle: p and alpha straight from the softmax
    wire [D-1:0] mask_rest;
    wire [L*SW-1:0] exact_nx, chain_nx;
    wire [M*OW-1:0] o_rd;
    wire [L*16-1:0] sm_p, sm_alpha;
    wire [D*9-1:0] k_row, v_row;
    genvar gi;
    generate
        for (gi = 0; gi < D; gi = gi + 1) begin : g_ext
            assign k_row[9*gi +: 9] = {i_k_data[8*gi+7], i_k_data[8*gi +: 8]};
            assign v_row[9*gi +: 9] = {i_v_data[8*gi+7], i_v_data[8*gi +: 8]};
        end
    endgenerate

    dl_mac_lanes #(.D(D), .L(L), .M(M), .RW(9), .SW(SW), .OW(OW)) u_mac (
        .i_clk(i_clk), .i_rst(i_rst),
        .i_q_we(q_we), .i_q_elem(q_elem), .i_q_group(q_grp), .i_q_data(i_q_data),
        .i_valid(mac_valid), .i_op(mac_op), .i_clear(mac_clear), .i_load_chain(mac_load_chain),
        .i_chunk(mac_chunk), .i_row(mac_row), .i_mask(mac_mask),
        .i_p(pv_comb ? sm_p : p_reg), .i_alpha(pv_comb ? sm_alpha : a_reg),
        .i_clear_o(clear_o), .o_mask_rest(mask_rest), .o_exact(), .o_chain(),
        .o_exact_next(exact_nx), .o_chain_next(chain_nx),
        .i_rd_lane(lane), .o_rd(o_rd)
    );

    reg          upd;          // the softmax step of column j runs this cycle
    wire [L*SW-1:0] score;
    generate
        for (gi = 0; gi < L; gi = gi + 1) begin : g_sel
            assign score[SW*gi +: SW] = exact_j[gi] ? exact_nx[SW*gi +: SW] : chain_nx[SW*gi +: SW];
        end
    endgenerate
    wire sm_skip, sm_pv;
    wire [L*LW-1:0] den_q;
    wire [L-1:0] started_q;
    dl_softmax_state #(.PIPE(0), .L(L), .SW(SW), .CW(CW), .SHW(SHW), .EW(EW), .TW(TW),
                       .LW(LW)) u_sm (
        .i_clk(i_clk), .i_rst(i_rst), .i_valid(upd), .i_first(j == 0),
        .i_lane_valid(valid_j), .i_score(score), .i_mant(i_mant), .i_sh(i_sh),
        .i_tau_e(i_tau_e), .i_no_skip(i_no_skip), .i_denom_kept(i_denom_kept),
        .o_valid(), .o_first(), .o_skip(sm_skip), .o_pv(sm_pv), .o_lane_valid(), .o_small(),
        .o_e(), .o_p(sm_p), .o_alpha(sm_alpha), .o_m(), .o_den(), .o_started(),
        .o_den_q(den_q), .o_started_q(started_q)
    );

    reg norm_start, norm_valid;
    wire norm_busy, norm_ovalid;
    dl_normalizer #(.L(L), .M(M), .LW(LW), .OW(OW)) u_norm (
        .i_clk(i_clk), .i_rst(i_rst), .i_start(norm_start), .i_den(den_q),
        .i_started(started_q), .o_busy(norm_busy), .o_recip(),
        .i_valid(norm_valid), .i_lane(lane), .i_o(o_rd), .o_valid(norm_ovalid), .o_y(o_y_data)
    );

    // ---------------- control (this cycle) ----------------
    reg  [3:0] nstate;
    reg        next_col;       // column j is finished at this cycle's edge
    reg        v_take;         // a value row moves this cycle
    reg        drop_now;       // ... and it is one being passed over
    wire       y_adv = !o_y_valid || i_y_ready;
    always @(*) begin
        nstate = state;
        mac_valid = 0; mac_op = OP_EXACT; mac_clear = 0; mac_load_chain = 0;
        mac_chunk = chunk; mac_row = k_row; mac_mask = i_dl_mask;
        q_we = 0; clear_o = 0; pv_comb = 0; upd = 0; next_col = 0;
        o_q_ready = 0; o_k_ready = 0; o_dl_ready = 0; o_v_ready = 0;
        norm_start = 0; norm_valid = 0; v_take = 0; drop_now = 0;
        case (state)
            S_IDLE: if (i_start) begin
                clear_o = 1;
                nstate = S_Q;
            end
            S_Q: if (i_q_valid) begin
                o_q_ready = 1;
                q_we = 1;
                if (q_grp == LG - 1 && q_elem == D - 1) nstate = S_EX;  // column 0 is a sink
            end
            S_EX: if (i_k_valid) begin
                mac_valid = 1; mac_op = OP_EXACT; mac_row = k_row;
                mac_clear = (chunk == 0); mac_load_chain = sink_j;
                if (chunk == NC - 1) begin
                    o_k_ready = 1;
                    if (!de_any_j) upd = 1;
                    else if (i_dl_valid && i_dl_mask == 0) begin
                        o_dl_ready = 1;  // a delta row with nothing stored: no delta cycles
                        upd = 1;
                    end else nstate = S_DE;
                end
            end
            S_DE: if (i_dl_valid) begin
                mac_mask = de_first ? i_dl_mask : rem;
                mac_row = i_dl_data;   // packed: delta cycle c (= chunk) reads chunk c
                if (mac_mask == 0) begin
                    o_dl_ready = 1;      // no MAC work: the softmax step gets its own cycle
                    upd = 1;
                end else begin
                    mac_valid = 1; mac_op = OP_DELTA;
                    if (mask_rest == 0) begin
                        o_dl_ready = 1;
                        upd = 1;
                    end
                end
            end
            S_PV: if (i_v_valid && v_drop == 0) begin
                mac_valid = 1; mac_op = OP_PV; mac_row = v_row;
                if (chunk == NC - 1) begin
                    o_v_ready = 1; v_take = 1;
                    next_col = 1;
                end
            end
            S_RECIP: begin
                norm_start = 1;
                nstate = S_WAIT;
            end
            S_WAIT: if (!norm_busy) nstate = S_OUT;
            S_OUT: if (y_adv) begin
                norm_valid = 1;
                if (lane == L - 1 && chunk == NC - 1) nstate = S_DRAIN;
            end
            S_DRAIN: if (i_y_ready) nstate = S_IDLE;
            default: nstate = S_IDLE;
        endcase
        // the softmax step decides the column's PV
        if (upd) begin
            if (sm_pv) begin
                nstate = S_PV;
                if (!mac_valid && i_v_valid && v_drop == 0) begin
                    // no MAC work this cycle: the first PV chunk runs with the fresh p and alpha
                    mac_valid = 1; mac_op = OP_PV; mac_row = v_row; mac_chunk = 0; pv_comb = 1;
                    if (NC == 1) begin
                        o_v_ready = 1; v_take = 1;
                        next_col = 1;
                    end
                end
            end else begin
                next_col = 1;
                if (i_v_valid && v_drop == 0) begin
                    o_v_ready = 1; v_take = 1; drop_now = 1;  // pass over the skipped row
                end
            end
        end
        // value rows of earlier skipped columns that were not there yet
        if (!v_take && v_drop != 0 && i_v_valid) begin
            o_v_ready = 1; v_take = 1; drop_now = 1;
        end
        if (next_col) nstate = last_col ? S_RECIP : (ex_any_j1 ? S_EX : S_DE);
    end

    // ---------------- control (state) ----------------
    always @(posedge i_clk) begin
        if (i_rst) begin
            state <= S_IDLE; j <= 0; chunk <= 0; lane <= 0; de_first <= 1; rem <= 0;
            q_elem <= 0; q_grp <= 0;
            v_drop <= 0; p_reg <= 0; a_reg <= 0; o_done <= 0; o_y_valid <= 0;
        end else begin
            state <= nstate;
            o_done <= 0;
            if (state == S_IDLE && i_start) begin
                j <= 0; chunk <= 0; lane <= 0; de_first <= 1; v_drop <= 0;
                q_elem <= 0; q_grp <= 0;
            end
            if (q_we) begin
                q_elem <= (q_elem == D - 1) ? 0 : q_elem + 1'b1;
                if (q_elem == D - 1) q_grp <= (q_grp == LG - 1) ? 0 : q_grp + 1'b1;
            end
            if (mac_valid && mac_op == OP_EXACT)
                chunk <= (chunk == NC - 1) ? 0 : chunk + 1'b1;
            if (mac_valid && mac_op == OP_DELTA) begin
                rem <= mask_rest;
                de_first <= 0;
                chunk <= chunk + 1'b1;  // the next packed chunk of the row
            end
            if (o_dl_ready) begin
                de_first <= 1;
                chunk <= 0;             // (the first PV chunk below still advances it)
            end
            if (mac_valid && mac_op == OP_PV)
                chunk <= (mac_chunk == NC - 1) ? 0 : mac_chunk + 1'b1;
            if (upd) begin
                p_reg <= sm_p;
                a_reg <= sm_alpha;
            end
            if (upd && !sm_pv && !drop_now) v_drop <= v_drop + 1'b1;
            else if (drop_now && !(upd && !sm_pv)) v_drop <= v_drop - 1'b1;
            if (next_col) j <= j + 1'b1;
            if (state == S_RECIP) begin
                lane <= 0; chunk <= 0;
            end
            if (norm_valid) begin
                chunk <= (chunk == NC - 1) ? 0 : chunk + 1'b1;
                if (chunk == NC - 1) lane <= (lane == L - 1) ? 0 : lane + 1'b1;
            end
            if (norm_valid) o_y_valid <= 1;
            else if (i_y_ready) o_y_valid <= 0;
            if (state == S_DRAIN && i_y_ready) o_done <= 1;
        end
    end
endmodule
