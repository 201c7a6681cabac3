// hlo::Builder's output as text: the exact MLIR each helper emits is what
// every PJRT plugin parses and what the compilation cache keys on.
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "test_runner.h"

using namespace torch_tpu::hlo;  // the module under test

namespace {

const TensorType kRows{ElementType::F32, {4, 3}};
const TensorType kVector{ElementType::F32, {5}};

// The program's body: the lines between the signature and func.return.
std::string body(const Builder& b, const Value& out) {
  std::string text = b.finish({out});
  const size_t begin = text.find('\n', text.find("func.func")) + 1;
  return text.substr(begin, text.find("    \"func.return\"") - begin);
}

struct Emitted {
  std::string body;
  TensorType type;
};

// What `build` emits for parameters of `types` (%arg0, %arg1, ...).
Emitted emit(const std::vector<TensorType>& types,
             const std::function<Value(Builder&, const std::vector<Value>&)>& build) {
  Builder b;
  std::vector<Value> params;
  for (const TensorType& t : types) params.push_back(b.parameter(t));
  Value out = build(b, params);
  return {body(b, out), out.type};
}

using Params = std::vector<Value>;

}  // namespace

TEST(hlo, program_lists_parameters_and_marks_donated_ones) {
  Builder b;
  Value x = b.parameter(kRows);
  Value y = b.parameter({ElementType::S64, {}});
  b.mark_donated(x);
  CHECK_EQ(x.name, "%arg0");
  CHECK_EQ(y.name, "%arg1");
  CHECK_EQ(b.parameters().size(), size_t{2});
  CHECK(b.parameters()[0].donated);
  CHECK(!b.parameters()[1].donated);
  CHECK_EQ(b.finish({y, x}),
           "module @torch_tpu {\n"
           "  func.func public @main(%arg0: tensor<4x3xf32> {jax.buffer_donor = true}, %arg1: tensor<i64>) -> "
           "(tensor<i64>, tensor<4x3xf32>) {\n"
           "    \"func.return\"(%arg1, %arg0) : (tensor<i64>, tensor<4x3xf32>) -> ()\n"
           "  }\n"
           "}\n");
}

TEST(hlo, ops_take_fresh_names_in_generic_form) {
  Builder b;
  Value x = b.parameter(kVector);
  Value e = b.unary("exponential", x);
  Value s = b.binary("add", e, x);
  CHECK_EQ(e.name, "%0");
  CHECK_EQ(s.name, "%1");
  CHECK_EQ(body(b, s),
           "    %0 = \"stablehlo.exponential\"(%arg0) : (tensor<5xf32>) -> tensor<5xf32>\n"
           "    %1 = \"stablehlo.add\"(%0, %arg0) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>\n");
}

TEST(hlo, gather_leaves_empty_dimension_lists_out) {
  GatherDims g = GatherDims::points(2, 1);
  CHECK_EQ(g.collapsed_slice_dims, (std::vector<int64_t>{0, 1}));
  CHECK_EQ(g.slice_sizes, (std::vector<int64_t>{1, 1}));
  Emitted e = emit({kRows, {ElementType::S64, {2, 2}}},
                   [&](Builder& b, const Params& p) { return b.gather(p[0], p[1], g, {2}); });
  CHECK_EQ(e.type.str(), "tensor<2xf32>");
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = #stablehlo.gather<"
           "collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, "
           "indices_are_sorted = false, slice_sizes = array<i64: 1, 1>} : (tensor<4x3xf32>, tensor<2x2xi64>) -> "
           "tensor<2xf32>\n");
}

TEST(hlo, gather_points_reads_one_element_per_coordinate_vector) {
  Emitted e = emit({kRows, {ElementType::S64, {7, 6, 2}}},
                   [](Builder& b, const Params& p) { return b.gather_points(p[0], p[1]); });
  CHECK_EQ(e.type.str(), "tensor<7x6xf32>");
  CHECK(e.body.find("#stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], "
                    "index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}") !=
        std::string::npos);
}

TEST(hlo, gather_slices_keeps_the_other_dims_whole) {
  Emitted e = emit({{ElementType::BF16, {4, 3, 2}}, {ElementType::S32, {5, 1}}},
                   [](Builder& b, const Params& p) { return b.gather_slices(p[0], 1, p[1]); });
  CHECK_EQ(e.type.str(), "tensor<4x5x2xbf16>");
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = #stablehlo.gather<"
           "offset_dims = [0, 2], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, "
           "indices_are_sorted = false, slice_sizes = array<i64: 4, 1, 2>} : (tensor<4x3x2xbf16>, tensor<5x1xi32>) -> "
           "tensor<4x5x2xbf16>\n");
}

TEST(hlo, scatter_points_overwrite_returns_the_update) {
  Emitted e = emit({kVector, {ElementType::S64, {3, 1}}, {ElementType::F32, {3}}},
                   [](Builder& b, const Params& p) { return b.scatter_points(p[0], p[1], p[2], overwrite); });
  CHECK_EQ(e.type.str(), kVector.str());
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.scatter\"(%arg0, %arg1, %arg2) ({\n"
           "    ^bb0(%1: tensor<f32>, %2: tensor<f32>):\n"
           "      \"stablehlo.return\"(%2) : (tensor<f32>) -> ()\n"
           "    }) {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
           "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
           "unique_indices = false} : (tensor<5xf32>, tensor<3x1xi64>, tensor<3xf32>) -> tensor<5xf32>\n");
}

// A 1-d operand may take flat positions without the index vector dim: it is
// implicit, after the updates' dims.
TEST(hlo, scatter_points_takes_flat_positions_for_a_1d_operand) {
  Emitted e = emit({kVector, {ElementType::S32, {2, 3}}, {ElementType::F32, {2, 3}}},
                   [](Builder& b, const Params& p) { return b.scatter_points(p[0], p[1], p[2], accumulate); });
  CHECK(e.body.find("index_vector_dim = 2>") != std::string::npos);
}

TEST(hlo, scatter_slices_accumulate_adds_in_its_region) {
  Emitted e = emit({kRows, {ElementType::S64, {2, 1}}, {ElementType::F32, {2, 3}}},
                   [](Builder& b, const Params& p) { return b.scatter_slices(p[0], 0, p[1], p[2], accumulate); });
  CHECK_EQ(e.type.str(), kRows.str());
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.scatter\"(%arg0, %arg1, %arg2) ({\n"
           "    ^bb0(%1: tensor<f32>, %2: tensor<f32>):\n"
           "      %3 = \"stablehlo.add\"(%1, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
           "      \"stablehlo.return\"(%3) : (tensor<f32>) -> ()\n"
           "    }) {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
           "update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
           "index_vector_dim = 1>, unique_indices = false} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> "
           "tensor<4x3xf32>\n");
}

TEST(hlo, scatter_combiner_builds_its_own_region_ops) {
  ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  auto combiner = [](Builder& rb, const Value& current, const Value& update) {
    return rb.binary("maximum", rb.binary("multiply", current, update), current);
  };
  Emitted e = emit({{ElementType::S32, {4}}, {ElementType::S64, {2, 1}}, {ElementType::S32, {2}}},
                   [&](Builder& b, const Params& p) { return b.scatter(p[0], p[1], p[2], s, combiner); });
  // Ops built by the combiner are numbered after the region's arguments and
  // indented inside it; the scatter's own name comes first.
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.scatter\"(%arg0, %arg1, %arg2) ({\n"
           "    ^bb0(%1: tensor<i32>, %2: tensor<i32>):\n"
           "      %3 = \"stablehlo.multiply\"(%1, %2) : (tensor<i32>, tensor<i32>) -> tensor<i32>\n"
           "      %4 = \"stablehlo.maximum\"(%3, %1) : (tensor<i32>, tensor<i32>) -> tensor<i32>\n"
           "      \"stablehlo.return\"(%4) : (tensor<i32>) -> ()\n"
           "    }) {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
           "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
           "unique_indices = false} : (tensor<4xi32>, tensor<2x1xi64>, tensor<2xi32>) -> tensor<4xi32>\n");
}

TEST(hlo, dynamic_slice_names_its_sizes) {
  const TensorType index{ElementType::S64, {}};
  Emitted e = emit({kRows, index, index},
                   [](Builder& b, const Params& p) { return b.dynamic_slice(p[0], {p[1], p[2]}, {2, 3}); });
  CHECK_EQ(e.type.str(), "tensor<2x3xf32>");
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.dynamic_slice\"(%arg0, %arg1, %arg2) {slice_sizes = array<i64: 2, 3>} : "
           "(tensor<4x3xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>\n");
}

TEST(hlo, rng_bit_generator_returns_the_next_state_and_the_bits) {
  Builder b;
  Value state = b.parameter({ElementType::U64, {2}});
  auto [next, bits] = b.rng_bit_generator(state, {ElementType::U32, {8}}, RngAlgorithm::ThreeFry);
  CHECK_EQ(next.name, "%0#0");
  CHECK_EQ(next.type.str(), state.type.str());
  CHECK_EQ(bits.name, "%0#1");
  CHECK_EQ(bits.type.str(), "tensor<8xui32>");
  CHECK_EQ(body(b, bits),
           "    %0:2 = \"stablehlo.rng_bit_generator\"(%arg0) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : "
           "(tensor<2xui64>) -> (tensor<2xui64>, tensor<8xui32>)\n");
  Builder p;
  Value s = p.parameter({ElementType::U64, {2}});
  CHECK(body(p, p.rng_bit_generator(s, {ElementType::U64, {1}}, RngAlgorithm::Philox).second)
            .find("rng_algorithm PHILOX") != std::string::npos);
}

TEST(hlo, rollback_forgets_ops_parameters_and_names_after_the_checkpoint) {
  Builder b;
  Value x = b.parameter(kVector);
  Value kept = b.unary("negate", x);
  const std::string before = b.finish({kept});
  const Builder::Checkpoint c = b.checkpoint();
  Value y = b.parameter(kVector);
  b.scatter_points(x, b.parameter({ElementType::S64, {2, 1}}), b.binary("add", y, y), accumulate);
  CHECK_EQ(b.parameters().size(), size_t{3});
  b.rollback(c);
  CHECK_EQ(b.parameters().size(), size_t{1});
  CHECK_EQ(b.finish({kept}), before);
  CHECK_EQ(b.unary("negate", kept).name, "%1");  // the next name is the one after the checkpoint
}

// A lowering can throw in the middle of a region (its combiner rejected an
// argument): rollback must also leave the region, so later ops land at the
// function's level.
TEST(hlo, rollback_from_inside_a_region_returns_to_the_function_body) {
  Builder b;
  Value x = b.parameter(kVector);
  const Builder::Checkpoint c = b.checkpoint();
  Value coords = b.parameter({ElementType::S64, {1, 1}});
  Value one = b.parameter({ElementType::F32, {1}});
  CHECK_THROWS(b.scatter_points(x, coords, one,
                                [](Builder& rb, const Value& current, const Value&) -> Value {
                                  rb.unary("negate", current);
                                  throw std::invalid_argument("combiner rejects");
                                }),
               std::invalid_argument, "combiner rejects");
  b.rollback(c);
  Value r = b.unary("negate", x);
  CHECK_EQ(body(b, r), "    %0 = \"stablehlo.negate\"(%arg0) : (tensor<5xf32>) -> tensor<5xf32>\n");
}

TEST(hlo, padding_attr_lists_low_and_high_per_dim) {
  CHECK_EQ(Builder::padding_attr({1, 0}, {2, 0}), "dense<[[1, 2], [0, 0]]> : tensor<2x2xi64>");
}

TEST(hlo, sort_gives_its_comparator_both_sides_of_every_operand) {
  Emitted e = emit({kVector, {ElementType::S64, {5}}}, [](Builder& b, const Params& p) {
    return b.sort(p, 0, /*is_stable=*/true, [](Builder& rb, const std::vector<Value>& a) {
      return std::vector<Value>{rb.compare(a[0], a[1], CompareDirection::LT)};
    })[1];
  });
  CHECK_EQ(e.type.str(), "tensor<5xi64>");
  CHECK_EQ(e.body,
           "    %0:2 = \"stablehlo.sort\"(%arg0, %arg1) ({\n"
           "    ^bb0(%1: tensor<f32>, %2: tensor<f32>, %3: tensor<i64>, %4: tensor<i64>):\n"
           "      %5 = \"stablehlo.compare\"(%1, %2) {comparison_direction = #stablehlo<comparison_direction LT>, "
           "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
           "      \"stablehlo.return\"(%5) : (tensor<i1>) -> ()\n"
           "    }) {dimension = 0 : i64, is_stable = true} : (tensor<5xf32>, tensor<5xi64>) -> "
           "(tensor<5xf32>, tensor<5xi64>)\n");
}

TEST(hlo, reduce_window_counts_whole_windows_and_names_only_given_attributes) {
  Emitted e = emit({kRows}, [](Builder& b, const Params& p) {
    Window w{{2, 3}, {2, 1}, {1, 1}, {0, 1}, {1, 1}};
    return b.reduce_window({p[0]}, {b.constant(0, ElementType::F32)}, w, [](Builder& rb, const std::vector<Value>& a) {
      return std::vector<Value>{rb.binary("add", a[0], a[1])};
    })[0];
  });
  // rows: (4 + 0 + 1 - 2) / 2 + 1 = 2; columns: (3 + 1 + 1 - 3) / 1 + 1 = 3.
  CHECK_EQ(e.type.str(), "tensor<2x3xf32>");
  CHECK(e.body.find("}) {padding = dense<[[0, 1], [1, 1]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, "
                    "window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 2, 1>} : "
                    "(tensor<4x3xf32>, tensor<f32>) -> tensor<2x3xf32>\n") != std::string::npos);
  Emitted bare = emit({kVector}, [](Builder& b, const Params& p) {
    return b.reduce_window(
        {p[0]}, {b.constant(0, ElementType::F32)}, Window{{5}},
        [](Builder& rb, const std::vector<Value>& a) { return std::vector<Value>{rb.binary("add", a[0], a[1])}; })[0];
  });
  CHECK_EQ(bare.type.str(), "tensor<1xf32>");
  CHECK(bare.body.find("}) {window_dimensions = array<i64: 5>} :") != std::string::npos);
}

TEST(hlo, convolution_spells_its_layouts_window_and_precision) {
  const TensorType input{ElementType::F32, {1, 2, 5}}, kernel{ElementType::F32, {4, 2, 3}};
  Emitted e = emit({input, kernel}, [](Builder& b, const Params& p) {
    ConvWindow w{{1}, {1}, {1}, {1}, {1}, 1, 1};
    return b.convolution(p[0], p[1], ConvDims{1}, w, {ElementType::F32, {1, 4, 5}}, "HIGHEST");
  });
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.convolution\"(%arg0, %arg1) {batch_group_count = 1 : i64, dimension_numbers = "
           "#stablehlo.conv<[b, f, 0]x[o, i, 0]->[b, f, 0]>, feature_group_count = 1 : i64, lhs_dilation = "
           "array<i64: 1>, padding = dense<[[1, 1]]> : tensor<1x2xi64>, precision_config = [#stablehlo<precision "
           "HIGHEST>, #stablehlo<precision HIGHEST>], rhs_dilation = array<i64: 1>, window_strides = array<i64: 1>} : "
           "(tensor<1x2x5xf32>, tensor<4x2x3xf32>) -> tensor<1x4x5xf32>\n");
  Emitted swapped = emit({input, kernel}, [](Builder& b, const Params& p) {
    return b.convolution(p[0], p[1], ConvDims{1, true, true, true}, ConvWindow{{1}, {0}, {0}, {1}, {1}, 1, 2},
                         {ElementType::F32, {2, 2, 3}});
  });
  CHECK(swapped.body.find("batch_group_count = 2 : i64, dimension_numbers = #stablehlo.conv<[f, b, 0]x[i, o, 0]->"
                          "[f, b, 0]>") != std::string::npos);
}

TEST(hlo, fft_names_its_type_and_lengths) {
  Emitted e = emit(
      {kRows}, [](Builder& b, const Params& p) { return b.fft(p[0], FftType::RFFT, {3}, {ElementType::C64, {4, 2}}); });
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.fft\"(%arg0) {fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 3>} : "
           "(tensor<4x3xf32>) -> tensor<4x2xcomplex<f32>>\n");
}

TEST(hlo, triangular_solve_spells_its_flags) {
  const TensorType a{ElementType::F32, {3, 3}};
  Emitted e = emit({a, kRows}, [](Builder& b, const Params& p) {
    return b.triangular_solve(p[0], p[1], /*left_side=*/false, /*lower=*/true, /*unit_diagonal=*/false,
                              /*transpose_a=*/true);
  });
  CHECK_EQ(e.type.str(), kRows.str());
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.triangular_solve\"(%arg0, %arg1) {left_side = false, lower = true, unit_diagonal = "
           "false, transpose_a = #stablehlo<transpose TRANSPOSE>} : (tensor<3x3xf32>, tensor<4x3xf32>) -> "
           "tensor<4x3xf32>\n");
}

TEST(hlo, reduce_of_several_operands_drops_the_dims_and_pairs_its_block_arguments) {
  Emitted e = emit({kRows, {ElementType::S64, {4, 3}}}, [](Builder& b, const Params& p) {
    return b.reduce(p, {b.constant(0, ElementType::F32), b.constant_int(0, ElementType::S64)}, {1},
                    [](Builder& rb, const std::vector<Value>& a) {
                      return std::vector<Value>{rb.binary("add", a[0], a[2]), rb.binary("add", a[1], a[3])};
                    })[1];
  });
  CHECK_EQ(e.type.str(), "tensor<4xi64>");
  CHECK(e.body.find("^bb0(%3: tensor<f32>, %4: tensor<i64>, %5: tensor<f32>, %6: tensor<i64>):") != std::string::npos);
  CHECK(e.body.find("}) {dimensions = array<i64: 1>} : (tensor<4x3xf32>, tensor<4x3xi64>, tensor<f32>, tensor<i64>) "
                    "-> (tensor<4xf32>, tensor<4xi64>)\n") != std::string::npos);
}

TEST(hlo, complex_takes_its_type_from_its_parts) {
  Emitted e = emit({kVector, kVector}, [](Builder& b, const Params& p) { return b.complex(p[0], p[1]); });
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.complex\"(%arg0, %arg1) : (tensor<5xf32>, tensor<5xf32>) -> "
           "tensor<5xcomplex<f32>>\n");
  const TensorType f64{ElementType::F64, {}};
  CHECK_EQ(emit({f64, f64}, [](Builder& b, const Params& p) { return b.complex(p[0], p[1]); }).type.str(),
           "tensor<complex<f64>>");
  Builder b;
  Value half = b.parameter({ElementType::F16, {5}});
  CHECK_THROWS(b.complex(half, half), std::invalid_argument, "no complex type has f16 parts");
}

TEST(hlo, reverse_names_its_dims) {
  Emitted e = emit({kRows}, [](Builder& b, const Params& p) { return b.reverse(p[0], {0, 1}); });
  CHECK_EQ(e.body,
           "    %0 = \"stablehlo.reverse\"(%arg0) {dimensions = array<i64: 0, 1>} : (tensor<4x3xf32>) -> "
           "tensor<4x3xf32>\n");
}

TEST(hlo, constant_vectors_spell_every_element) {
  Emitted floats =
      emit({}, [](Builder& b, const Params&) { return b.constant_vector({0.5, 2, 1e20}, ElementType::F64); });
  CHECK_EQ(floats.body,
           "    %0 = \"stablehlo.constant\"() {value = dense<[0.5, 2.0, 1.0e+20]> : tensor<3xf64>} : () -> "
           "tensor<3xf64>\n");
  Emitted ints = emit({}, [](Builder& b, const Params&) { return b.constant_indices({3, 0, -1}); });
  CHECK_EQ(ints.body,
           "    %0 = \"stablehlo.constant\"() {value = dense<[3, 0, -1]> : tensor<3xi64>} : () -> tensor<3xi64>\n");
}
