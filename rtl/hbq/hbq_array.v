// hbq_array: a small weight-stationary HBQ accelerator top (specs/hbq.md §2.2, §2.3):
// N_PE hbq_pe processing elements, an activation buffer, a partial-sum buffer and the
// partial-sum accumulate unit, computing one output tile of a tiled GEMM
//     Y[t, n] = sum over K blocks kb of dot(A[t, kb], W[n, kb])      (t < n_tok, n < N_PE)
// and streaming the binary16 results. Reference: coaccel.models.hbq.hbq_gemm_codes with
// psum_mode = "mxint8_running" (PSUM_MODE = 1, sa_n = N_PE) or "fp16" (PSUM_MODE = 0), out fp16.
//
// ---- Host interface -------------------------------------------------------------------------
// Activation buffer write port (any time the array is idle): i_act_we stores one token's K block
//   at address i_act_waddr = kb * TOK_DEPTH + t: i_act_codes (B elements, element g at
//   [ACT_BITS*g +: ACT_BITS]) and i_act_scale_word ([7:0] E5M3 L1 scale, [8 + n*j +: n] L2 code j,
//   n = ACT_L2_BITS), the 24-bit "activation-scale RF word" layout of §1.9.
// Command: i_start (one cycle, ignored while o_busy) with i_n_tok in 1..TOK_DEPTH tokens and
//   i_n_kb in 1..KB_DEPTH K blocks starts a tile; o_busy stays high until its last result is out.
// Weight stream, valid/ready: for every K block kb = 0 .. n_kb-1 the array takes N_PE beats
//   (i_w_codes: B E2M1 codes, i_w_scale, i_w_l2: L2 code j at [W_L2_BITS*j +: W_L2_BITS],
//   i_w_scheme) and shifts them down the PE chain: the first beat of a K block ends in PE N_PE-1,
//   so send output channel N_PE-1 first and channel 0 last. A beat moves when i_w_valid and
//   o_w_ready are both high at a rising edge; the host may insert gaps (i_w_valid low) anywhere.
// Results, valid-only (the host must take every beat): o_y_valid with o_y_tok = t and
//   o_y_data = the N_PE binary16 results of token t, channel i at [16*i +: 16]; tokens come out
//   in order 0 .. n_tok-1 on consecutive cycles.
//
// ---- Schedule (the cycle model; rtl/hbq/README.md derives the totals) ------------------------
// IDLE -> LOAD (N_PE accepted beats) -> WAIT (until no token of the previous K block is still
// in flight) -> ISSUE (one token per cycle: activation-buffer read, broadcast to every PE) ->
// LOAD of the next K block, or DRAIN after the last K block -> IDLE.
// Token pipeline, issue cycle c (c+k = k cycles later):
//   c    activation-buffer read (synchronous RAM)       c+1  PE stage-1 input (i_valid)
//   c+3  partial-sum buffer read of token t             c+4  PE result + old partial sum ->
//   accumulate unit; PSUM_MODE 1 (hbq_psum_unit): c+6 MXINT8 word written back, c+7 o_y (last
//   K block: the written word dequantized); PSUM_MODE 0 (FP16 adders): c+5 FP16 word written
//   back, c+6 o_y. The first K block adds to +0 instead of the (unwritten) buffer word.
// Reset: synchronous, active high; every control and output register is cleared (no X out).
`default_nettype none

module hbq_array (
    i_clk, i_rst,
    i_act_we, i_act_waddr, i_act_codes, i_act_scale_word,
    i_start, i_n_tok, i_n_kb, o_busy,
    i_w_valid, o_w_ready, i_w_codes, i_w_scale, i_w_l2, i_w_scheme,
    o_y_valid, o_y_tok, o_y_data
);
  parameter integer N_PE = 4;          // processing elements = output channels per tile
  parameter integer B = 128;           // L1 block length
  parameter integer UB = 32;           // micro-block length
  parameter integer ACT_BITS = 5;      // activation element width (E2M(ACT_BITS-3))
  parameter integer ACT_L2 = 3;        // activation L2 scheme (hbq_pe encoding)
  parameter integer ACT_L2_BITS = 2;
  parameter integer W_L2 = 7;          // weight L2 scheme (hbq_pe encoding; 7 = Mix)
  parameter integer W_L2_BITS = 2;
  parameter integer OUT_MODE = 0;      // PE L1 conversion: 0 exact, 1 rtl_compat
  parameter integer PSUM_MODE = 1;     // 0 = FP16 partial sums, 1 = MXINT8 running partial sums
  parameter integer PSUM_ROUNDING = 0; // MXINT8 element rounding: 0 nearest even, 1 truncate
  parameter integer TOK_DEPTH = 16;    // tokens per tile (activation / partial-sum buffer depth)
  parameter integer KB_DEPTH = 4;      // K blocks held in the activation buffer

  // ---- derived sizes ----
  localparam integer NUB = B / UB;
  localparam integer W_WORD = B * 4 + 8 + NUB * W_L2_BITS + 1;  // one PE's weight register
  localparam integer A_SCALE_W = 8 + NUB * ACT_L2_BITS;         // activation scale word
  localparam integer A_WORD = B * ACT_BITS + A_SCALE_W;          // activation buffer word
  localparam integer A_DEPTH = TOK_DEPTH * KB_DEPTH;
  localparam integer AW = (A_DEPTH > 1) ? $clog2(A_DEPTH) : 1;   // activation buffer address
  localparam integer TW = (TOK_DEPTH > 1) ? $clog2(TOK_DEPTH) : 1;  // token index
  localparam integer NTW = $clog2(TOK_DEPTH + 1);                // token count 1..TOK_DEPTH
  localparam integer KW = (KB_DEPTH > 1) ? $clog2(KB_DEPTH) : 1;    // K-block index
  localparam integer NKW = $clog2(KB_DEPTH + 1);                 // K-block count 1..KB_DEPTH
  localparam integer CW = (N_PE > 1) ? $clog2(N_PE) : 1;          // weight-beat counter
  localparam integer P_WORD = (PSUM_MODE == 1) ? 8 * N_PE + 8 : 16 * N_PE;  // psum buffer word
  localparam integer PE_LATENCY = 3;                    // hbq_pe register stages
  localparam integer S_PE_IN = 1;                       // pipeline stage of the PE input
  localparam integer S_PE_OUT = S_PE_IN + PE_LATENCY;   // PE result / accumulate input (4)
  localparam integer S_WB = S_PE_OUT + ((PSUM_MODE == 1) ? 2 : 1);  // buffer write-back stage
  localparam integer S_OUT = S_WB + 1;                  // o_y stage

  input  wire                   i_clk;
  input  wire                   i_rst;
  input  wire                   i_act_we;
  input  wire [AW-1:0]          i_act_waddr;
  input  wire [B*ACT_BITS-1:0]  i_act_codes;
  input  wire [A_SCALE_W-1:0]   i_act_scale_word;
  input  wire                   i_start;
  input  wire [NTW-1:0]         i_n_tok;
  input  wire [NKW-1:0]         i_n_kb;
  output wire                   o_busy;
  input  wire                   i_w_valid;
  output wire                   o_w_ready;
  input  wire [B*4-1:0]         i_w_codes;
  input  wire [7:0]             i_w_scale;
  input  wire [NUB*W_L2_BITS-1:0] i_w_l2;
  input  wire                   i_w_scheme;
  output reg                    o_y_valid;
  output reg  [TW-1:0]          o_y_tok;
  output reg  [16*N_PE-1:0]     o_y_data;

  generate
    if (PSUM_MODE < 0 || PSUM_MODE > 1 || N_PE < 1 || TOK_DEPTH < 1 || KB_DEPTH < 1)
    begin : g_bad_parameter
      hbq_array_unsupported_parameter u_error ();
    end
  endgenerate

  // ---- control ----
  localparam [2:0] S_IDLE = 3'd0, S_LOAD = 3'd1, S_WAIT = 3'd2, S_ISSUE = 3'd3, S_DRAIN = 3'd4;
  reg [2:0]     state;
  reg [NTW-1:0] n_tok;
  reg [NKW-1:0] n_kb;
  reg [KW-1:0]  kb;
  reg [TW-1:0]  tok;
  reg [CW-1:0]  beats;

  // Token pipeline: valid, token index, first / last K block, for stages 1 .. S_OUT.
  reg [S_OUT:1] p_valid;
  reg [S_OUT:1] p_first;
  reg [S_OUT:1] p_last;
  reg [TW*S_OUT-1:0] p_tok;  // stage s at [TW*(s-1) +: TW]

  wire issue = (state == S_ISSUE);
  wire [NTW-1:0] tok_count = tok;  // zero-extended
  wire [NKW-1:0] kb_count = kb;
  wire last_tok = (tok_count == n_tok - 1'b1);
  wire last_kb = (kb_count == n_kb - 1'b1);
  wire w_take = i_w_valid && o_w_ready;
  wire [S_WB:1] in_flight_wb = p_valid[S_WB:1];  // tokens whose partial sum is not written yet

  assign o_w_ready = (state == S_LOAD);
  assign o_busy = (state != S_IDLE);

  always @(posedge i_clk) begin
    if (i_rst) begin
      state <= S_IDLE;
      n_tok <= {NTW{1'b0}};
      n_kb <= {NKW{1'b0}};
      kb <= {KW{1'b0}};
      tok <= {TW{1'b0}};
      beats <= {CW{1'b0}};
    end else begin
      case (state)
        S_IDLE: if (i_start) begin
          n_tok <= i_n_tok;
          n_kb <= i_n_kb;
          kb <= {KW{1'b0}};
          beats <= {CW{1'b0}};
          state <= S_LOAD;
        end
        S_LOAD: if (w_take) begin
          beats <= beats + 1'b1;
          if (beats == N_PE - 1) begin
            beats <= {CW{1'b0}};
            state <= S_WAIT;
          end
        end
        S_WAIT: if (in_flight_wb == {S_WB{1'b0}}) begin
          tok <= {TW{1'b0}};
          state <= S_ISSUE;
        end
        S_ISSUE: begin
          tok <= tok + 1'b1;
          if (last_tok) begin
            if (last_kb) begin
              state <= S_DRAIN;
            end else begin
              kb <= kb + 1'b1;
              state <= S_LOAD;
            end
          end
        end
        S_DRAIN: if (p_valid == {S_OUT{1'b0}}) state <= S_IDLE;
        default: state <= S_IDLE;
      endcase
    end
  end

  always @(posedge i_clk) begin
    if (i_rst) begin
      p_valid <= {S_OUT{1'b0}};
      p_first <= {S_OUT{1'b0}};
      p_last <= {S_OUT{1'b0}};
      p_tok <= {TW * S_OUT{1'b0}};
    end else begin
      p_valid <= {p_valid[S_OUT-1:1], issue};
      p_first <= {p_first[S_OUT-1:1], kb == {KW{1'b0}}};
      p_last <= {p_last[S_OUT-1:1], last_kb};
      p_tok <= {p_tok[TW*(S_OUT-1)-1:0], tok};
    end
  end
  wire [TW-1:0] tok_rd = p_tok[TW*(S_PE_OUT-2) +: TW];  // stage S_PE_OUT - 1: buffer read
  wire [TW-1:0] tok_wb = p_tok[TW*(S_WB-1) +: TW];      // stage S_WB: write-back and output

  // ---- activation buffer: one token's block + scale word per read, broadcast to every PE ----
  wire [A_WORD-1:0] act_q;
  wire [AW-1:0]     act_raddr = kb * TOK_DEPTH + tok;
  hbq_ram_1r1w #(.W(A_WORD), .DEPTH(A_DEPTH)) u_act_buf (
      .i_clk(i_clk),
      .i_we(i_act_we),
      .i_waddr(i_act_waddr),
      .i_wdata({i_act_scale_word, i_act_codes}),
      .i_re(issue),
      .i_raddr(act_raddr),
      .o_rdata(act_q)
  );
  wire [B*ACT_BITS-1:0]       a_codes = act_q[B*ACT_BITS-1:0];
  wire [7:0]                  a_scale = act_q[B*ACT_BITS +: 8];
  wire [NUB*ACT_L2_BITS-1:0]  a_l2 = act_q[B*ACT_BITS+8 +: NUB*ACT_L2_BITS];

  // ---- weight-stationary PE chain ----
  wire [W_WORD-1:0] w_in = {i_w_scheme, i_w_l2, i_w_scale, i_w_codes};
  wire [16*N_PE-1:0] pe_fp16;
  wire [N_PE-1:0]    pe_valid;
  genvar i;
  generate
    for (i = 0; i < N_PE; i = i + 1) begin : g_pe
      reg [W_WORD-1:0] w_q;  // held weights (B codes, scale, L2 codes, scheme bit)
      always @(posedge i_clk) begin
        if (i_rst) w_q <= {W_WORD{1'b0}};
        else if (w_take) w_q <= (i == 0) ? w_in : g_pe[(i > 0) ? i - 1 : 0].w_q;
      end
      hbq_pe #(
          .B(B), .UB(UB), .ACT_BITS(ACT_BITS), .ACT_L2(ACT_L2), .ACT_L2_BITS(ACT_L2_BITS),
          .W_L2(W_L2), .W_L2_BITS(W_L2_BITS), .OUT_MODE(OUT_MODE)
      ) u_pe (
          .i_clk(i_clk),
          .i_rst(i_rst),
          .i_valid(p_valid[S_PE_IN]),
          .i_w(w_q[B*4-1:0]),
          .i_w_scale(w_q[B*4 +: 8]),
          .i_w_l2(w_q[B*4+8 +: NUB*W_L2_BITS]),
          .i_w_scheme(w_q[W_WORD-1]),
          .i_a(a_codes),
          .i_a_scale(a_scale),
          .i_a_l2(a_l2),
          .o_valid(pe_valid[i]),
          .o_fp16(pe_fp16[16*i +: 16]),
          .o_dbg_ub_valid(),
          .o_dbg_ub_sums(),
          .o_dbg_scaled(),
          .o_dbg_pt_valid(),
          .o_dbg_p_total()
      );
    end
  endgenerate

  // ---- partial-sum buffer and accumulate unit ----
  wire [P_WORD-1:0] psum_q;
  wire              wb_en;
  wire [P_WORD-1:0] wb_word;
  wire [16*N_PE-1:0] y_next;  // results of the token at the write-back stage
  hbq_ram_1r1w #(.W(P_WORD), .DEPTH(TOK_DEPTH)) u_psum_buf (
      .i_clk(i_clk),
      .i_we(wb_en),
      .i_waddr(tok_wb),
      .i_wdata(wb_word),
      .i_re(p_valid[S_PE_OUT-1]),
      .i_raddr(tok_rd),
      .o_rdata(psum_q)
  );

  generate
    if (PSUM_MODE == 1) begin : g_mxint8
      wire              acc_valid;
      wire [8*N_PE-1:0] acc_q;
      wire [7:0]        acc_x;
      hbq_psum_unit #(.SA_N(N_PE), .ROUNDING(PSUM_ROUNDING)) u_acc (
          .i_clk(i_clk),
          .i_rst(i_rst),
          .i_valid(p_valid[S_PE_OUT]),
          .i_first(p_first[S_PE_OUT]),
          .i_old_q(psum_q[8*N_PE-1:0]),
          .i_old_x(psum_q[8*N_PE +: 8]),
          .i_psum(pe_fp16),
          .o_sum_valid(),
          .o_sum(),
          .o_valid(acc_valid),
          .o_q(acc_q),
          .o_x(acc_x)
      );
      // Drain mode: the streamed result is the stored MXINT8 word, dequantized.
      hbq_mxint8_dequant #(.N(N_PE)) u_out_dequant (
          .i_q(acc_q),
          .i_x(acc_x),
          .o_fp16(y_next)
      );
      assign wb_en = p_valid[S_WB];
      assign wb_word = {acc_x, acc_q};
    end else begin : g_fp16
      reg [16*N_PE-1:0] sum_q;
      wire [16*N_PE-1:0] old = p_first[S_PE_OUT] ? {16 * N_PE{1'b0}} : psum_q;
      wire [16*N_PE-1:0] sum;
      genvar c;
      for (c = 0; c < N_PE; c = c + 1) begin : g_add
        hbq_fp16_add u_add (
            .i_a(old[16*c +: 16]),
            .i_b(pe_fp16[16*c +: 16]),
            .o_sum(sum[16*c +: 16])
        );
      end
      always @(posedge i_clk) begin
        if (i_rst) sum_q <= {16 * N_PE{1'b0}};
        else if (p_valid[S_PE_OUT]) sum_q <= sum;
      end
      assign y_next = sum_q;
      assign wb_en = p_valid[S_WB];
      assign wb_word = sum_q;
    end
  endgenerate

  always @(posedge i_clk) begin
    if (i_rst) begin
      o_y_valid <= 1'b0;
      o_y_tok <= {TW{1'b0}};
      o_y_data <= {16 * N_PE{1'b0}};
    end else begin
      o_y_valid <= p_valid[S_WB] && p_last[S_WB];
      if (p_valid[S_WB] && p_last[S_WB]) begin
        o_y_tok <= tok_wb;
        o_y_data <= y_next;
      end
    end
  end
endmodule

`default_nettype wire
