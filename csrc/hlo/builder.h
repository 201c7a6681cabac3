// A small StableHLO builder: emits one `func.func @main` as MLIR text in the
// generic op form, which every PJRT plugin's parser accepts. Knows StableHLO
// only; no torch, no PJRT.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace torch_tpu::hlo {

enum class ElementType { Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128 };

const char* mlir_name(ElementType t);  // "f32", "i1", "ui8", "complex<f32>" ...
bool is_float(ElementType t);          // f16, bf16, f32, f64
bool is_integer(ElementType t);        // signed or unsigned, not pred
bool is_unsigned(ElementType t);
bool is_complex(ElementType t);
ElementType complex_part_type(ElementType t);  // c64 -> f32, c128 -> f64; others unchanged
ElementType complex_type(ElementType part);    // f32 -> c64, f64 -> c128
int64_t byte_size(ElementType t);

using Shape = std::vector<int64_t>;

struct TensorType {
  ElementType dtype = ElementType::F32;
  Shape shape;
  std::string str() const;  // tensor<2x3xf32>
  int64_t numel() const;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
};

struct Value {
  std::string name;  // %3, %7#1, %arg0
  TensorType type;
  const Shape& shape() const { return type.shape; }
  ElementType dtype() const { return type.dtype; }
  int64_t rank() const { return type.rank(); }
};

enum class CompareDirection { EQ, NE, LT, LE, GT, GE };

// stablehlo.gather's dimension numbers, named as in the StableHLO spec.
struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> slice_sizes;
  // One element per start: every dim of a rank-`rank` operand collapsed.
  static GatherDims points(int64_t rank, int64_t index_vector_dim);
};

// stablehlo.scatter's dimension numbers, named as in the StableHLO spec.
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};

enum class RngAlgorithm { Default, ThreeFry, Philox };

// A window over every dim of an operand (stablehlo.reduce_window): its
// sizes, strides and dilations, and the padding added before and after each
// dim. Empty strides or dilations mean 1s, empty padding 0s.
struct Window {
  std::vector<int64_t> dimensions, strides, dilations, pad_lo, pad_hi;
};

// stablehlo.convolution's dimension numbers for operands laid out as two
// named dims followed by `spatial` spatial dims in order, the layouts
// lowerings use: input and output [b, f, 0, 1, ...] or [f, b, ...], kernel
// [o, i, ...] or [i, o, ...].
struct ConvDims {
  size_t spatial = 0;
  bool input_feature_first = false;
  bool kernel_input_first = false;
  bool output_feature_first = false;
};

// stablehlo.convolution's window, per spatial dim, and its group counts.
struct ConvWindow {
  std::vector<int64_t> strides, pad_lo, pad_hi, lhs_dilation, rhs_dilation;
  int64_t feature_groups = 1, batch_groups = 1;
};

enum class FftType { FFT, IFFT, RFFT, IRFFT };

// Arguments marked donated may have their memory reused for an output:
// the one they become (`output`, where known and of the same type), or
// whichever output of their type XLA pairs them with.
struct Parameter {
  TensorType type;
  bool donated = false;
  int output = -1;
};

class Builder;

// How a scatter combines the value at a position (`current`) with an update
// for it; it runs on 0-d values, once per update.
using ScatterCombiner = std::function<Value(Builder&, const Value& current, const Value& update)>;
Value overwrite(Builder& b, const Value& current, const Value& update);   // the update replaces it
Value accumulate(Builder& b, const Value& current, const Value& update);  // stablehlo.add

class Builder {
 public:
  Value parameter(const TensorType& type);
  const std::vector<Parameter>& parameters() const { return params_; }
  // `output`: the index, among finish()'s outputs, of the value that
  // replaces the parameter's (an in-place op's storage, written): its
  // memory becomes that output's. XLA left to pair donors with outputs
  // pairs them by type in order, so a step's new exp_avg could take a
  // gradient's old buffer and each crossed pair cost a copy (121 copies
  // in a fused encoder step). -1: any output of its type.
  void mark_donated(const Value& param, int output = -1);

  // Generic op: "stablehlo.<name>"(operands) {attrs} : (types) -> result.
  Value op(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
           const std::string& attrs = "");
  std::vector<Value> op_multi(const std::string& name, const std::vector<Value>& operands,
                              const std::vector<TensorType>& results, const std::string& attrs = "");
  // An op with one region whose block takes `block_args` and whose body
  // `body` builds (returning what the region returns).
  using RegionBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::vector<Value> op_with_region(const std::string& name, const std::vector<Value>& operands,
                                    const std::vector<TensorType>& results, const std::string& attrs,
                                    const std::vector<TensorType>& block_args, const RegionBody& body);

  // ---- common ops -------------------------------------------------------
  Value constant(double value, ElementType dtype);                          // 0-d
  Value constant_int(int64_t value, ElementType dtype);                     // 0-d, exact for integers
  Value constant_bits_like(const std::string& literal, ElementType dtype);  // 0-d from a literal
  Value splat(double value, const TensorType& type);                        // broadcast constant
  // 1-D constants: `values` in `dtype` (a float type), and int64 `values`.
  Value constant_vector(const std::vector<double>& values, ElementType dtype);
  Value constant_indices(const std::vector<int64_t>& values);
  Value convert(const Value& v, ElementType dtype);  // no-op when equal
  Value bitcast_convert(const Value& v, const TensorType& type);
  Value reshape(const Value& v, const Shape& shape);
  Value broadcast_in_dim(const Value& v, const Shape& shape, const std::vector<int64_t>& dims);
  Value broadcast_to(const Value& v, const Shape& shape);  // numpy-style (right-aligned)
  Value transpose(const Value& v, const std::vector<int64_t>& perm);
  Value slice(const Value& v, const Shape& start, const Shape& limit, const Shape& strides);
  Value concatenate(const std::vector<Value>& vs, int64_t dim);
  Value pad(const Value& v, const Value& pad_value, const Shape& low, const Shape& high, const Shape& interior);
  Value iota(const TensorType& type, int64_t dim);
  Value reverse(const Value& v, const std::vector<int64_t>& dims);
  Value dynamic_update_slice(const Value& base, const Value& update, const std::vector<Value>& starts);
  // `sizes` elements from 0-d `starts` on (clamped in range, as StableHLO does).
  Value dynamic_slice(const Value& operand, const std::vector<Value>& starts, const Shape& sizes);
  Value gather(const Value& operand, const Value& indices, const GatherDims& dims, const Shape& result);
  Value scatter(const Value& operand, const Value& indices, const Value& updates, const ScatterDims& dims,
                const ScatterCombiner& combiner);
  // One element per coordinate: operand[coords[i...]] for coords
  // [*S, rank(operand)], a value of shape S.
  Value gather_points(const Value& operand, const Value& coords);
  // operand[coords[i...]] (combiner)= updates[i...]: coords is
  // [*updates.shape, rank(operand)] (for a 1-d operand, also just
  // updates.shape: a missing index vector dim counts as one of size 1).
  Value scatter_points(const Value& operand, const Value& coords, const Value& updates,
                       const ScatterCombiner& combiner);
  // operand's slices along `dim` at `positions` ([n, 1]): dim's size becomes n.
  Value gather_slices(const Value& operand, int64_t dim, const Value& positions);
  // updates (operand's shape with n along `dim`) combined into operand's
  // slices along `dim` at `positions` ([n, 1]).
  Value scatter_slices(const Value& operand, int64_t dim, const Value& positions, const Value& updates,
                       const ScatterCombiner& combiner);
  // stablehlo.rng_bit_generator: (the next state, random bits of `bits`).
  std::pair<Value, Value> rng_bit_generator(const Value& state, const TensorType& bits, RngAlgorithm algorithm);
  // stablehlo.sort of `operands` (one shape) along `dim`; `comparator` gets
  // (lhs of operand 0, rhs of operand 0, lhs of operand 1, ...) as 0-d values
  // and returns one tensor<i1>: whether lhs goes first.
  std::vector<Value> sort(const std::vector<Value>& operands, int64_t dim, bool is_stable,
                          const RegionBody& comparator);
  // stablehlo.reduce_window of `operands` (one shape) with 0-d `inits`, one
  // each; `body` combines (accumulators..., elements...). The result shape
  // is the number of whole windows per dim.
  std::vector<Value> reduce_window(const std::vector<Value>& operands, const std::vector<Value>& inits,
                                   const Window& window, const RegionBody& body);
  // stablehlo.convolution of `lhs` with the kernel `rhs` into `result`.
  Value convolution(const Value& lhs, const Value& rhs, const ConvDims& dims, const ConvWindow& window,
                    const TensorType& result, const std::string& precision = "DEFAULT");
  // stablehlo.fft of kind `type` over x's last fft_length.size() dims.
  Value fft(const Value& x, FftType type, const std::vector<int64_t>& fft_length, const TensorType& result);
  // stablehlo.triangular_solve: X with op(a) X = b (`left_side`) or
  // X op(a) = b, a lower or upper triangular (its other half unread), with a
  // unit diagonal when `unit_diagonal`; op(a) is a's conjugate transpose
  // (its transpose, for real a) when `transpose_a`.
  Value triangular_solve(const Value& a, const Value& b, bool left_side, bool lower, bool unit_diagonal,
                         bool transpose_a);
  Value unary(const std::string& name, const Value& v);  // name: "exponential", "tanh" ...
  // A complex value's parts, in its part type (complex_part_type), and its
  // conjugate (a real value is its own).
  Value real(const Value& z);
  Value imag(const Value& z);
  Value conjugate(const Value& z);
  // re + i im, of the parts' shape and their complex type (complex_type).
  Value complex(const Value& re, const Value& im);
  Value binary(const std::string& name, const Value& a, const Value& b);  // same types
  Value compare(const Value& a, const Value& b, CompareDirection dir);
  Value select(const Value& pred, const Value& on_true, const Value& on_false);
  Value clamp(const Value& lo, const Value& v, const Value& hi);
  // Reduction with a binary combiner ("add", "multiply", "maximum", "minimum", "and", "or").
  Value reduce(const Value& v, const Value& init, const std::vector<int64_t>& dims, const std::string& combiner);
  // stablehlo.reduce of `operands` (one shape) over `dims`, with 0-d `inits`,
  // one each; `body` combines (accumulators..., elements...) into the next
  // accumulators. The results have the operands' dtypes, without `dims`.
  std::vector<Value> reduce(const std::vector<Value>& operands, const std::vector<Value>& inits,
                            const std::vector<int64_t>& dims, const RegionBody& body);
  Value dot_general(const Value& a, const Value& b, const std::vector<int64_t>& batch_a,
                    const std::vector<int64_t>& batch_b, const std::vector<int64_t>& contract_a,
                    const std::vector<int64_t>& contract_b, const TensorType& result,
                    const std::string& precision = "DEFAULT");

  // Calls the entry of a foreign module (a JAX function's export,
  // foreign_module.h) on `operands`, which must have its argument types:
  // its functions join the program, renamed and private, once per module
  // text however often it is called. Returns the entry's results.
  std::vector<Value> call_foreign(const std::string& module_text, const std::vector<Value>& operands);

  // The program text; `outputs` are the function results.
  std::string finish(const std::vector<Value>& outputs) const;

  static std::string dims_attr(const std::vector<int64_t>& dims);  // array<i64: 1, 2>
  // Padding per dim as StableHLO reads it: dense<[[lo, hi], ...]> : tensor<Nx2xi64>.
  static std::string padding_attr(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi);

  // Undo everything emitted since a checkpoint (an op whose lowering threw
  // must leave no trace in a program that outlives it).
  struct Checkpoint {
    size_t params, text;
    int next;
    size_t foreign, functions;
  };
  Checkpoint checkpoint() const {
    return {params_.size(), blocks_.front().size(), next_, foreign_.size(), functions_.size()};
  }
  void rollback(const Checkpoint& c);
  size_t text_size() const { return blocks_.front().size(); }

 private:
  std::string fresh();
  void emit(const std::string& line);
  std::vector<Parameter> params_;
  std::vector<std::string> blocks_{std::string()};  // innermost region last
  int next_ = 0;
  int indent_ = 2;
  // Foreign modules spliced so far (their text; the k-th is prefixed
  // `foreign<k>_`) and their functions' text, after `main`.
  std::vector<std::string> foreign_;
  std::string functions_;

 public:
  // A CHLO op, "chlo.<name>", for math StableHLO lacks (erf). Every XLA
  // plugin's parser accepts CHLO (JAX emits it) and expands it when compiling.
  Value chlo(const std::string& name, const std::vector<Value>& operands, const TensorType& result);

  // stablehlo.while over loop values `init`: `cond` maps them to a
  // tensor<i1>, `body` to their next values (same types). Regions read only
  // their block arguments and what they build: a value the loop needs rides
  // along as a loop value (implicit captures are not portable across plugins).
  std::vector<Value> while_loop(const std::vector<Value>& init, const RegionBody& cond, const RegionBody& body);
};

}  // namespace torch_tpu::hlo
