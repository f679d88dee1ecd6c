// hbq_pe: HBQ processing element, one L1-block dot product per cycle
// (specs/hbq.md §1.2, §1.4, §2.1; reference: coaccel.models.hbq.block_dot).
//
// Datapath for one block of B weight / activation elements:
//   1. B E2M1 x E2M(ACT_BITS-3) multipliers (hbq_mul): exact integer products, units 2^-PF;
//   2. one adder tree per micro-block of UB elements (hbq_adder_tree): NUB = B/UB exact sums;
//      registered (stage 1);
//   3. L2 scaling of each micro-block sum by the activation and weight level-2 multipliers in
//      their hardware integer form (shift for PoT, small multiply otherwise), adding FRA + FRW
//      fractional bits, so the scaled sums are in units of 2^-F, F = PF + FRA + FRW;
//   4. the L2 adder tree over the NUB scaled sums: P_total; registered (stage 2);
//   5. L1-scale application and conversion to binary16 (hbq_l1_convert), exact or rtl_compat;
//      registered (stage 3).
//
// L2 scheme encoding (ACT_L2, W_L2), after coaccel.models.hbq.l2_multipliers:
//   0 none (factor 1, +0 fractional bits)   4 SIG_2  8 + 2c (+3)
//   1 PoT  1 << c (+0, a shift)            5 SIG_3  8 + c  (+3)
//   2 INT  c + 1  (+0)                     6 SIG_4  16 + c (+4)
//   3 SIG-1 c + 2 (+1)                     7 Mix (weights only): i_w_scheme ? SIG_3 : SIG_2
// e.g. HBQ-A/HBQ-E activations SIG-1 2 bit (F = 7 with Mix weights), the accelerator's 1-bit
// PoT activations (F = 6).
//
// Handshake: valid-only, no back-pressure. When i_valid is high at a rising clock edge the block
// on the inputs is taken; its result appears on o_fp16 with o_valid high exactly LATENCY = 3
// cycles later (o_valid high after the 3rd rising edge counted from the sampling edge as the 1st).
// A new block may be given every cycle (initiation interval 1); gaps in i_valid propagate as gaps
// in o_valid. Data registers load only with their valid bit and hold otherwise.
// Reset: synchronous, active high; clears every register, so no output is X after reset.
//
// Debug outputs (for the testbench; they are the pipeline registers themselves, no extra logic
// apart from o_dbg_scaled, which is the stage-2 input wiring):
//   o_dbg_ub_valid / o_dbg_ub_sums[j*UBW +: UBW]   stage-1 micro-block sums (1 cycle after input)
//   o_dbg_scaled[j*SW +: SW]                       L2-scaled sums, valid with o_dbg_ub_valid
//   o_dbg_pt_valid / o_dbg_p_total                 stage-2 P_total (2 cycles after input)
//
// Packing (specs/hbq.md §1.9): element g at [X*g +: X] (X = 4 weights, ACT_BITS activations),
// L2 code j at [n*j +: n]; E5M3 scales {E[4:0], M[2:0]}; i_w_scheme 0 = SIG_2, 1 = SIG_3.
`default_nettype none

module hbq_pe (
    i_clk, i_rst,
    i_valid,
    i_w, i_w_scale, i_w_l2, i_w_scheme,
    i_a, i_a_scale, i_a_l2,
    o_valid, o_fp16,
    o_dbg_ub_valid, o_dbg_ub_sums, o_dbg_scaled,
    o_dbg_pt_valid, o_dbg_p_total
);
  parameter integer B = 128;          // L1 block length (elements per dot product)
  parameter integer UB = 32;          // micro-block length; must divide B
  parameter integer ACT_BITS = 5;     // activation element width, E2M(ACT_BITS-3), 4..8
  parameter integer ACT_L2 = 3;       // activation L2 scheme (encoding above; not 7)
  parameter integer ACT_L2_BITS = 2;  // activation L2 code width, 1 or 2
  parameter integer W_L2 = 7;         // weight L2 scheme (encoding above)
  parameter integer W_L2_BITS = 2;    // weight L2 code width, 1 or 2
  parameter integer OUT_MODE = 0;     // 0 = exact (RNE once), 1 = rtl_compat

  localparam integer L2_NONE = 0, L2_POT = 1, L2_INT = 2, L2_SIG1 = 3;
  localparam integer L2_SIG2 = 4, L2_SIG3 = 5, L2_SIG4 = 6, L2_MIX = 7;

  // Integer multiplier of L2 code `code` (sel: the Mix scheme bit) and its fractional bits.
  function integer l2_mult(input integer scheme, input integer code, input integer sel);
    begin
      case (scheme)
        L2_POT:  l2_mult = 1 << code;
        L2_INT:  l2_mult = code + 1;
        L2_SIG1: l2_mult = code + 2;
        L2_SIG2: l2_mult = 8 + 2 * code;
        L2_SIG3: l2_mult = 8 + code;
        L2_SIG4: l2_mult = 16 + code;
        L2_MIX:  l2_mult = (sel != 0) ? 8 + code : 8 + 2 * code;
        default: l2_mult = 1;
      endcase
    end
  endfunction

  function integer l2_frac(input integer scheme);
    begin
      case (scheme)
        L2_SIG1: l2_frac = 1;
        L2_SIG2, L2_SIG3, L2_MIX: l2_frac = 3;
        L2_SIG4: l2_frac = 4;
        default: l2_frac = 0;
      endcase
    end
  endfunction

  // The largest multiplier of a scheme with `bits`-bit codes (Mix: the SIG_2 table is larger).
  function integer l2_max(input integer scheme, input integer bits);
    begin
      l2_max = l2_mult(scheme, (1 << bits) - 1, 0);
    end
  endfunction

  // ---- derived widths (the only place they are computed) ----
  localparam integer W_BITS = 4;                        // E2M1 weights
  localparam integer PW = (W_BITS - 2) + (ACT_BITS - 2) + 5;  // signed product width
  localparam integer PF = (W_BITS - 3) + (ACT_BITS - 3);      // product fractional bits
  localparam integer NUB = B / UB;                      // micro-blocks per L1 block
  localparam integer UBW = PW + $clog2(UB);             // micro-block sum width
  localparam integer MWA = $clog2(l2_max(ACT_L2, ACT_L2_BITS) + 1);  // activation multiplier
  localparam integer MWW = $clog2(l2_max(W_L2, W_L2_BITS) + 1);      // weight multiplier
  localparam integer SAW = UBW + MWA;                   // after the activation factor
  localparam integer SW = SAW + MWW;                    // scaled micro-block sum width
  localparam integer PTW = SW + $clog2(NUB);            // P_total width
  localparam integer F = PF + l2_frac(ACT_L2) + l2_frac(W_L2);  // fractional bits of P_total
  localparam integer LATENCY = 3;                       // register stages (documentation)

  input  wire                       i_clk;
  input  wire                       i_rst;
  input  wire                       i_valid;
  input  wire [B*W_BITS-1:0]        i_w;
  input  wire [7:0]                 i_w_scale;
  input  wire [NUB*W_L2_BITS-1:0]   i_w_l2;
  input  wire                       i_w_scheme;
  input  wire [B*ACT_BITS-1:0]      i_a;
  input  wire [7:0]                 i_a_scale;
  input  wire [NUB*ACT_L2_BITS-1:0] i_a_l2;
  output reg                        o_valid;
  output reg  [15:0]                o_fp16;
  output wire                       o_dbg_ub_valid;
  output wire [NUB*UBW-1:0]         o_dbg_ub_sums;
  output wire [NUB*SW-1:0]          o_dbg_scaled;
  output wire                       o_dbg_pt_valid;
  output wire [PTW-1:0]             o_dbg_p_total;

  // ---- parameter checks: an unsupported value fails elaboration (missing module) ----
  generate
    if (B % UB != 0 || ACT_BITS < 4 || ACT_BITS > 8 || ACT_L2 < 0 || ACT_L2 > 6 ||
        W_L2 < 0 || W_L2 > 7 || ACT_L2_BITS < 1 || ACT_L2_BITS > 2 || W_L2_BITS < 1 ||
        W_L2_BITS > 2 || OUT_MODE < 0 || OUT_MODE > 1) begin : g_bad_parameter
      hbq_pe_unsupported_parameter u_error ();
    end
  endgenerate

  // ---- stage 1: products and micro-block adder trees ----
  wire [B*PW-1:0]    prod;
  wire [NUB*UBW-1:0] ub_sums;
  hbq_mul #(.N(B), .ACT_BITS(ACT_BITS), .PW(PW)) u_mul (
      .i_w(i_w),
      .i_a(i_a),
      .o_p(prod)
  );
  genvar j;
  generate
    for (j = 0; j < NUB; j = j + 1) begin : g_ub_tree
      hbq_adder_tree #(.N(UB), .IW(PW), .OW(UBW)) u_tree (
          .i_data(prod[UB*PW*j +: UB*PW]),
          .o_sum(ub_sums[UBW*j +: UBW])
      );
    end
  endgenerate

  reg                       r1_valid;
  reg [NUB*UBW-1:0]         r1_sums;
  reg [NUB*ACT_L2_BITS-1:0] r1_a_l2;
  reg [NUB*W_L2_BITS-1:0]   r1_w_l2;
  reg                       r1_sel;
  reg [7:0]                 r1_a_scale;
  reg [7:0]                 r1_w_scale;

  always @(posedge i_clk) begin
    if (i_rst) begin
      r1_valid <= 1'b0;
      r1_sums <= {NUB * UBW{1'b0}};
      r1_a_l2 <= {NUB * ACT_L2_BITS{1'b0}};
      r1_w_l2 <= {NUB * W_L2_BITS{1'b0}};
      r1_sel <= 1'b0;
      r1_a_scale <= 8'd0;
      r1_w_scale <= 8'd0;
    end else begin
      r1_valid <= i_valid;
      if (i_valid) begin
        r1_sums <= ub_sums;
        r1_a_l2 <= i_a_l2;
        r1_w_l2 <= i_w_l2;
        r1_sel <= i_w_scheme;
        r1_a_scale <= i_a_scale;
        r1_w_scale <= i_w_scale;
      end
    end
  end

  // ---- stage 2: L2 scaling and the L2 adder tree ----
  wire [NUB*SW-1:0] scaled;
  wire [PTW-1:0]    p_total;
  generate
    for (j = 0; j < NUB; j = j + 1) begin : g_l2
      wire signed [UBW-1:0] s = r1_sums[UBW*j +: UBW];
      wire [ACT_L2_BITS-1:0] ca = r1_a_l2[ACT_L2_BITS*j +: ACT_L2_BITS];
      wire [W_L2_BITS-1:0]   cw = r1_w_l2[W_L2_BITS*j +: W_L2_BITS];
      wire [MWA-1:0] ma = l2_mult(ACT_L2, ca, 0);
      wire [MWW-1:0] mw = l2_mult(W_L2, cw, r1_sel);
      wire signed [SAW-1:0] sa;
      if (ACT_L2 == L2_POT) begin : g_shift
        assign sa = s <<< ca;  // sign-extended to SAW bits, then shifted
      end else begin : g_mult
        assign sa = s * $signed({1'b0, ma});
      end
      wire signed [SW-1:0] sw = sa * $signed({1'b0, mw});
      assign scaled[SW*j +: SW] = sw;
    end
  endgenerate

  hbq_adder_tree #(.N(NUB), .IW(SW), .OW(PTW)) u_l2_tree (
      .i_data(scaled),
      .o_sum(p_total)
  );

  reg           r2_valid;
  reg [PTW-1:0] r2_p_total;
  reg [7:0]     r2_a_scale;
  reg [7:0]     r2_w_scale;

  always @(posedge i_clk) begin
    if (i_rst) begin
      r2_valid <= 1'b0;
      r2_p_total <= {PTW{1'b0}};
      r2_a_scale <= 8'd0;
      r2_w_scale <= 8'd0;
    end else begin
      r2_valid <= r1_valid;
      if (r1_valid) begin
        r2_p_total <= p_total;
        r2_a_scale <= r1_a_scale;
        r2_w_scale <= r1_w_scale;
      end
    end
  end

  // ---- stage 3: L1 scales and conversion to FP16 ----
  wire [15:0] fp16;
  hbq_l1_convert #(.PTW(PTW), .F(F), .OUT_MODE(OUT_MODE)) u_convert (
      .i_p(r2_p_total),
      .i_sa(r2_a_scale),
      .i_sw(r2_w_scale),
      .o_fp16(fp16)
  );

  always @(posedge i_clk) begin
    if (i_rst) begin
      o_valid <= 1'b0;
      o_fp16 <= 16'h0000;
    end else begin
      o_valid <= r2_valid;
      if (r2_valid) o_fp16 <= fp16;
    end
  end

  assign o_dbg_ub_valid = r1_valid;
  assign o_dbg_ub_sums = r1_sums;
  assign o_dbg_scaled = scaled;
  assign o_dbg_pt_valid = r2_valid;
  assign o_dbg_p_total = r2_p_total;
endmodule

`default_nettype wire
