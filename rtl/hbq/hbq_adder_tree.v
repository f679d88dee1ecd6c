// hbq_adder_tree: balanced binary tree of signed adders (specs/hbq.md §2.1 steps 2 and 4).
//
// Sums N signed IW-bit operands exactly. Level l of the tree has (N rounded up to a power of two)
// >> l nodes of IW + l bits, so no level can overflow; missing leaves (N not a power of two) are
// zero. The result is sign-extended (or, if the parent asks for fewer bits than the tree's
// natural IW + ceil(log2 N), truncated) to OW bits; the parent sizes OW.
//
// Operand k occupies i_data[IW*k +: IW]. Purely combinational. Every node is its own net
// (g_level[l].g_node[k].s) rather than a slice of a shared vector, which keeps event-driven
// simulators from re-evaluating whole levels on every change.
`default_nettype none

module hbq_adder_tree #(
    parameter integer N = 32,   // number of operands (>= 1)
    parameter integer IW = 10,  // operand width (signed)
    parameter integer OW = 15   // result width (signed); IW + $clog2(N) is always enough
) (
    input  wire [N*IW-1:0] i_data,
    output wire [OW-1:0]   o_sum
);
  localparam integer LV = $clog2(N);  // number of adder levels
  localparam integer NP = 1 << LV;    // leaves, padded to a power of two

  genvar l, k;
  generate
    for (l = 0; l <= LV; l = l + 1) begin : g_level
      for (k = 0; k < (NP >> l); k = k + 1) begin : g_node
        wire signed [IW+l-1:0] s;
        if (l == 0 && k < N) begin : g_leaf
          assign s = i_data[IW*k +: IW];
        end else if (l == 0) begin : g_pad
          assign s = {IW{1'b0}};
        end else begin : g_add
          // Both operands are sign-extended to the IW + l bit sum.
          assign s = g_level[l-1].g_node[2*k].s + g_level[l-1].g_node[2*k+1].s;
        end
      end
    end
  endgenerate

  wire signed [OW-1:0] result = g_level[LV].g_node[0].s;  // sign-extends (or truncates) to OW
  assign o_sum = result;
endmodule

`default_nettype wire
