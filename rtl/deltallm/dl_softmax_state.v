// dl_softmax_state: the VSSOS online-softmax state of L lanes, one key column per cycle
// (reference: the fixed-point step of coaccel.models.deltallm VSSOS, docs/deltallm.md §3).
//
// Per column, for every lane with i_lane_valid (the others keep their state):
//   m_new = started ? max(m, S) : S;   grow = started && m_new > m
//   alpha = exp2(min(((m_new - m) * C) >> sh, 4095)) if grow, else exp2(0) = 32768
//   E     = min(((m_new - S) * C) >> sh, 4095);  p = exp2(E)      (dl_exp2, UQ1.15)
//   small = E >= tau_E;  skip = (some lane valid) && every valid lane is small
//   l     = (grow ? (l * alpha) >> 15 : l) + p      (denom "full"; "kept": + p only if !skip)
// i_first marks the first column of a new vector (every lane restarts: started = 0, l = 0).
// The output accumulator o is rescaled by the same alpha in the PV step (dl_mac_lanes): a lane
// whose max grows has E = 0 < tau_E, so a column with a growing max is never skipped and its PV
// step always runs; lanes that did not grow have alpha = 32768, which leaves o unchanged.
//
// Ports (lane l at [W*l +: W]):
//   i_valid, i_first, i_lane_valid [L], i_score [L*SW] (signed)  -- one column per cycle
//   i_mant [L*CW], i_sh [L*SHW] (log2 scale C and shift per lane), i_tau_e [TW],
//   i_no_skip (tau = inf), i_denom_kept                           -- held per vector
//   o_valid, o_first, o_skip, o_pv (PV issue: a kept column), o_lane_valid [L], o_small [L],
//   o_e [L*EW], o_p [L*16], o_alpha [L*16], o_m [L*SW], o_den [L*LW], o_started [L]
//   o_den_q [L*LW], o_started_q [L]: the state registers (l, started) themselves
// PIPE = 1: latency 3 (max / exponent products / exp2 + denominator), initiation interval 1.
// PIPE = 0: the whole step is combinational (outputs valid in the cycle of i_valid; m, started
// and l update at that cycle's edge) -- the attention top uses this so that a column's softmax
// step happens in the cycle that produces its score.
module dl_softmax_state #(
    parameter integer PIPE = 1,
    parameter integer L   = 16,
    parameter integer SW  = 24,
    parameter integer CW  = 24,
    parameter integer SHW = 6,
    parameter integer EW  = 12,
    parameter integer TW  = 13,
    parameter integer LW  = 32
) (
    input  wire              i_clk,
    input  wire              i_rst,
    input  wire              i_valid,
    input  wire              i_first,
    input  wire [L-1:0]      i_lane_valid,
    input  wire [L*SW-1:0]   i_score,
    input  wire [L*CW-1:0]   i_mant,
    input  wire [L*SHW-1:0]  i_sh,
    input  wire [TW-1:0]     i_tau_e,
    input  wire              i_no_skip,
    input  wire              i_denom_kept,
    output reg               o_valid,
    output reg               o_first,
    output reg               o_skip,
    output reg               o_pv,
    output reg  [L-1:0]      o_lane_valid,
    output reg  [L-1:0]      o_small,
    output reg  [L*EW-1:0]   o_e,
    output reg  [L*16-1:0]   o_p,
    output reg  [L*16-1:0]   o_alpha,
    output reg  [L*SW-1:0]   o_m,
    output reg  [L*LW-1:0]   o_den,
    output reg  [L-1:0]      o_started,
    output wire [L*LW-1:0]   o_den_q,
    output wire [L-1:0]      o_started_q
);
    localparam integer DW = SW + 1;         // score difference (always >= 0 where used)
    localparam integer PW = DW + CW;        // difference * C
    localparam [EW-1:0] EMAX = 16 * 256 - 1;

    // ---------------- running max (state) ----------------
    reg [L*SW-1:0] m;
    reg [L-1:0]    started;

    // ---------------- stage A: running max ----------------
    wire           a_valid, a_first;
    wire [L-1:0]   a_lane, a_grow, a_started;
    wire [L*DW-1:0] a_dm, a_de;   // m_new - m_old, m_new - S
    wire [L*SW-1:0] a_m;

    integer l;
    reg signed [SW-1:0] s, mo, mn;
    reg [L*SW-1:0] m_next;
    reg [L-1:0]    st_next, grow, st_cur;
    reg [L*DW-1:0] dm, de;
    always @(*) begin
        st_cur = i_first ? {L{1'b0}} : started;
        for (l = 0; l < L; l = l + 1) begin
            s  = $signed(i_score[SW*l +: SW]);
            mo = i_first ? {SW{1'b0}} : m[SW*l +: SW];  // a new vector starts from m = 0
            mn = mo;
            if (i_lane_valid[l]) mn = (!st_cur[l] || s > mo) ? s : mo;
            grow[l] = i_lane_valid[l] && st_cur[l] && (mn > mo);
            m_next[SW*l +: SW] = mn;
            st_next[l] = st_cur[l] | i_lane_valid[l];
            dm[DW*l +: DW] = grow[l] ? ($signed({mn[SW-1], mn}) - $signed({mo[SW-1], mo})) : 0;
            de[DW*l +: DW] = i_lane_valid[l] ? ($signed({mn[SW-1], mn}) - $signed({s[SW-1], s})) : 0;
        end
    end

    always @(posedge i_clk) begin
        if (i_rst) begin
            m <= 0; started <= 0;
        end else if (i_valid) begin
            m <= m_next; started <= st_next;
        end
    end

    generate
        if (PIPE != 0) begin : g_pipe_a
            reg          r_valid, r_first;
            reg [L-1:0]  r_lane, r_grow, r_started;
            reg [L*DW-1:0] r_dm, r_de;
            reg [L*SW-1:0] r_m;
            always @(posedge i_clk) begin
                if (i_rst) begin
                    r_valid <= 0; r_first <= 0; r_lane <= 0; r_grow <= 0; r_dm <= 0; r_de <= 0;
                    r_m <= 0; r_started <= 0;
                end else begin
                    r_valid <= i_valid;
                    if (i_valid) begin
                        r_first <= i_first; r_lane <= i_lane_valid; r_grow <= grow;
                        r_dm <= dm; r_de <= de; r_m <= m_next; r_started <= st_next;
                    end
                end
            end
            assign {a_valid, a_first, a_lane, a_grow, a_dm, a_de, a_m, a_started} =
                   {r_valid, r_first, r_lane, r_grow, r_dm, r_de, r_m, r_started};
        end else begin : g_comb_a
            assign {a_valid, a_first, a_lane, a_grow, a_dm, a_de, a_m, a_started} =
                   {i_valid, i_first, i_lane_valid, grow, dm, de, m_next, st_next};
        end
    endgenerate

    // ---------------- stage B: exponents ----------------
    wire           b_valid, b_first;
    wire [L-1:0]   b_lane, b_grow, b_started;
    wire [L*EW-1:0] b_ea, b_e;
    wire [L*SW-1:0] b_m;
    reg [L*EW-1:0] ea, ee;
    reg [PW-1:0]   pa, pe;
    reg [SHW-1:0]  shl;
    always @(*) begin
        for (l = 0; l < L; l = l + 1) begin
            shl = i_sh[SHW*l +: SHW];
            pa = (a_dm[DW*l +: DW] * i_mant[CW*l +: CW]) >> shl;
            pe = (a_de[DW*l +: DW] * i_mant[CW*l +: CW]) >> shl;
            ea[EW*l +: EW] = (pa > EMAX) ? EMAX : pa[EW-1:0];
            ee[EW*l +: EW] = (pe > EMAX) ? EMAX : pe[EW-1:0];
        end
    end
    generate
        if (PIPE != 0) begin : g_pipe_b
            reg          r_valid, r_first;
            reg [L-1:0]  r_lane, r_grow, r_started;
            reg [L*EW-1:0] r_ea, r_e;
            reg [L*SW-1:0] r_m;
            always @(posedge i_clk) begin
                if (i_rst) begin
                    r_valid <= 0; r_first <= 0; r_lane <= 0; r_grow <= 0; r_started <= 0;
                    r_ea <= 0; r_e <= 0; r_m <= 0;
                end else begin
                    r_valid <= a_valid;
                    if (a_valid) begin
                        r_first <= a_first; r_lane <= a_lane; r_grow <= a_grow;
                        r_started <= a_started; r_ea <= ea; r_e <= ee; r_m <= a_m;
                    end
                end
            end
            assign {b_valid, b_first, b_lane, b_grow, b_started, b_ea, b_e, b_m} =
                   {r_valid, r_first, r_lane, r_grow, r_started, r_ea, r_e, r_m};
        end else begin : g_comb_b
            assign {b_valid, b_first, b_lane, b_grow, b_started, b_ea, b_e, b_m} =
                   {a_valid, a_first, a_lane, a_grow, a_started, ea, ee, a_m};
        end
    endgenerate

    // ---------------- stage C: exp2, skip, denominator ----------------
    wire [L*16-1:0] alpha_w, p_w;
    genvar g;
    generate
        for (g = 0; g < L; g = g + 1) begin : g_exp
            dl_exp2 #(.EW(EW)) u_alpha (.i_e(b_ea[EW*g +: EW]), .o_p(alpha_w[16*g +: 16]));
            dl_exp2 #(.EW(EW)) u_p     (.i_e(b_e[EW*g +: EW]),  .o_p(p_w[16*g +: 16]));
        end
    endgenerate

    reg [L*LW-1:0] den;         // the running denominators
    reg [L-1:0]    is_small;
    reg            skip;
    reg [L*LW-1:0] den_next;
    reg [L*16-1:0] alpha_o, p_o;
    reg [LW+15:0]  prod;
    reg [LW-1:0]   base;
    always @(*) begin
        skip = (b_lane != 0);
        for (l = 0; l < L; l = l + 1) begin
            is_small[l] = b_lane[l] && !i_no_skip && (b_e[EW*l +: EW] >= i_tau_e);
            if (b_lane[l] && !is_small[l]) skip = 1'b0;
        end
        for (l = 0; l < L; l = l + 1) begin
            alpha_o[16*l +: 16] = b_grow[l] ? alpha_w[16*l +: 16] : 16'd32768;
            p_o[16*l +: 16]     = b_lane[l] ? p_w[16*l +: 16] : 16'd0;
            base = b_first ? {LW{1'b0}} : den[LW*l +: LW];
            prod = base * alpha_w[16*l +: 16];
            if (b_grow[l]) base = prod[LW+14:15];
            den_next[LW*l +: LW] = base +
                ((i_denom_kept && skip) ? {LW{1'b0}} : {{(LW-16){1'b0}}, p_o[16*l +: 16]});
        end
    end
    always @(posedge i_clk) begin
        if (i_rst) den <= 0;
        else if (b_valid) den <= den_next;
    end

    assign o_den_q = den;          // the state itself (for the normalizer after the last column)
    assign o_started_q = started;
    wire pv_w = b_valid && !skip && (b_lane != 0);
    generate
        if (PIPE != 0) begin : g_pipe_c
            always @(posedge i_clk) begin
                if (i_rst) begin
                    o_valid <= 0; o_first <= 0; o_skip <= 0; o_pv <= 0; o_lane_valid <= 0;
                    o_small <= 0; o_e <= 0; o_p <= 0; o_alpha <= 0; o_m <= 0; o_den <= 0;
                    o_started <= 0;
                end else begin
                    o_valid <= b_valid;
                    o_pv <= pv_w;
                    if (b_valid) begin
                        o_first <= b_first; o_skip <= skip; o_lane_valid <= b_lane;
                        o_small <= is_small; o_e <= b_e; o_p <= p_o; o_alpha <= alpha_o;
                        o_m <= b_m; o_den <= den_next; o_started <= b_started;
                    end
                end
            end
        end else begin : g_comb_c
            always @(*) begin  // all zero without a column, like the registered outputs at reset
                o_valid = b_valid; o_pv = pv_w;
                o_first = b_valid & b_first; o_skip = b_valid & skip;
                o_lane_valid = b_valid ? b_lane : 0; o_small = b_valid ? is_small : 0;
                o_e = b_valid ? b_e : 0; o_p = b_valid ? p_o : 0;
                o_alpha = b_valid ? alpha_o : 0; o_m = b_valid ? b_m : 0;
                o_den = b_valid ? den_next : 0; o_started = b_valid ? b_started : 0;
            end
        end
    endgenerate
endmodule
