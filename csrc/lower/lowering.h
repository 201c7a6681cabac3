// One lowering per ATen op: a function that emits StableHLO for the op's
// inputs. Every execution path (Strict, Debug, DeferAndFuse, torch.compile)
// calls the same function. Lowerings know op semantics and the hlo builder,
// not torch: the device layer turns ATen arguments into `Arg`s and hands
// over the result types PyTorch's own meta kernel computed, so broadcasting,
// type promotion and shape checks are PyTorch's, exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::lower {

using hlo::Builder;
using hlo::ElementType;
using hlo::Shape;
using hlo::TensorType;
using hlo::Value;

// A Python number passed where the schema says `Scalar`.
struct ScalarArg {
  // Complex: a Python complex number, real part in `f`, imaginary in `imag`.
  // UInt: an integer past int64's range (c10::Scalar holds it as uint64), its
  // bits in `i`.
  enum class Kind { Float, Int, UInt, Bool, Complex } kind = Kind::Int;
  double f = 0;
  int64_t i = 0;
  double imag = 0;
  // Where the number came from, as the caller numbers its arguments' values
  // (the device's call signature), or -1 (a lowering's own number, or not
  // tracked). A Float that becomes a program input keeps its origin, so a
  // replay can feed the new call's number to the same program.
  int origin = -1;
  double as_double() const {
    if (kind == Kind::Float || kind == Kind::Complex) return f;
    return kind == Kind::UInt ? static_cast<double>(static_cast<uint64_t>(i)) : static_cast<double>(i);
  }
};

// Whether converting `s` to `dtype` overflows, by c10's rule for a Scalar
// (c10::checked_convert and c10::overflows): floats may hold inf and NaN,
// integers neither; a negative integer may wrap into an unsigned dtype down
// to minus its maximum (uint8 takes -255, not -256), a negative float may
// not; a complex number overflows a real dtype when its imaginary part is
// not 0; bool takes anything.
bool scalar_overflows(const ScalarArg& s, ElementType dtype);
// Throws ScalarOverflow, worded as CPU words it, when `s` overflows `dtype`.
void check_scalar_fits(const ScalarArg& s, ElementType dtype);
// Whether a float (or a complex part) overflows an integer dtype: the rule of
// the torch the device layer links (c10::overflows<To, double>), which
// changed between releases (torch 2.14 takes 127.5 into int8 as 127, 2.13
// refused it). lower/ knows no torch, so the device layer hands it that rule
// when it loads; until then (the lowering tests) floats past the dtype's
// maximum overflow.
using FloatIntoIntegerOverflows = bool (*)(double v, ElementType integer_dtype);
void set_float_into_integer_overflows(FloatIntoIntegerOverflows rule);
// Whether the torch the device layer links computes a bfloat16 or float16
// linspace in float32 from the ends rounded to the dtype, rounding once
// (torch 2.15), rather than in the dtype, rounding every operation (2.13,
// 2.14). The device layer hands over a function that asks that torch's CPU
// kernel; until then, every operation rounds.
void set_half_linspace_rounds_once(bool (*ask_torch)());
bool half_linspace_rounds_once();

struct Arg {
  enum class Kind { None, Tensor, TensorList, Int, Double, Bool, Scalar, IntList, DoubleList, String, Other };
  Kind kind = Kind::None;
  std::optional<Value> tensor;
  // Tensor: whether its memory is contiguous. Values are read through their
  // view layout, so semantics never depend on it; a few of PyTorch's kernels
  // return results that do (det/slogdet factor A^T for a contiguous A).
  bool contiguous = true;
  std::vector<std::optional<Value>> tensors;  // Tensor[] and Tensor?[]
  int64_t i = 0;
  double d = 0;
  bool b = false;
  ScalarArg scalar;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<int> double_origins;  // Scalar[] of floats: each element's ScalarArg::origin (empty: none)
  std::string s;

  bool is_none() const { return kind == Kind::None; }
};

// A number the program reads at run time instead of baking into its text, so
// a changing learning rate does not make a new program.
struct HostScalar {
  ElementType dtype;
  double f = 0;
  int64_t i = 0;
  bool is_float = false;
  // The ScalarArgs' origins that read this input (equal numbers share one
  // input); `fixed` when one of them has none, so the value is the program's.
  std::vector<int> origins;
  bool fixed = false;
  // Whether a number fed to this input must fit `dtype` (a Scalar converted
  // by LowerContext::scalar): a replay with one that does not is refused, so
  // that the lowering raises CPU's error.
  bool range_checked = false;
};

// tensor<i1> (0-d): whether `pred` (i1, any shape) holds everywhere.
Value all_true(Builder& b, const Value& pred);

// The kind of device a program is lowered for. An op lowers the same way on
// every device unless one device's compiler is pathological for it and
// another formulation is exact and fast there (conv.cpp: XLA:CPU's
// depthwise and grouped-gradient convolutions).
enum class Platform { Tpu, Gpu, Cpu };

class LowerContext {
 public:
  LowerContext(Builder& b, std::vector<Arg> args, std::vector<TensorType> out_types)
      : b(b), args(std::move(args)), out_types(std::move(out_types)) {}

  Builder& b;
  std::vector<Arg> args;
  std::vector<TensorType> out_types;         // PyTorch's result types, one per op result
  std::string matmul_precision = "DEFAULT";  // DEFAULT | HIGH | HIGHEST
  Platform platform = Platform::Tpu;         // the loaded plugin's (exec/lowered_kernel.cpp)

  const Value& tensor(size_t i) const;  // throws if the argument is not a tensor
  bool has(size_t i) const { return i < args.size() && !args[i].is_none(); }
  int64_t int_arg(size_t i, int64_t fallback = 0) const;
  double double_arg(size_t i, double fallback = 0) const;
  bool bool_arg(size_t i, bool fallback = false) const;
  const std::vector<int64_t>& ints(size_t i) const;

  // A Scalar argument as a 0-d value of `dtype`, converted as CPU's kernels
  // convert one (`scalar.to<scalar_t>()`): a number that overflows `dtype`
  // raises ScalarOverflow (check_scalar_fits), so pass the type CPU converts
  // it to (its opmath type where the kernel converts to that). 0, 1, -1 and
  // integers are constants; other floats become a runtime input (see
  // HostScalar).
  Value scalar(const ScalarArg& s, ElementType dtype);
  Value scalar_arg(size_t i, ElementType dtype) { return scalar(args.at(i).scalar, dtype); }
  // The same value converted as a tensor is cast, without a range check:
  // 1e300 is inf in float32, 1000 wraps to -24 in int8. For a Python number
  // in a tensor operand's place (x + 2.5, torch.where(c, x, 0.5): CPU wraps
  // it into a 0-d tensor), and for numbers a lowering computes itself.
  Value cast_scalar(const ScalarArg& s, ElementType dtype);
  // `s` as the 0-d value that fills a tensor of `type`, converted as CPU's
  // fill_ converts it: checked, except that fill_ short-circuits a
  // one-element tensor (at::detail::scalar_fill), which casts a
  // float16/bfloat16 value unchecked; torch.where(c, x, -1e9) and
  // x[0] = 1e9 make their values so.
  Value fill_scalar(const ScalarArg& s, const TensorType& type);
  const std::vector<HostScalar>& host_scalars() const { return host_scalars_; }
  std::vector<Value>& host_scalar_params() { return host_scalar_params_; }

  // State for stablehlo.rng_bit_generator (tensor<2xui64>), drawn from the
  // device generator when the program runs.
  Value rng_state();
  int rng_requests() const { return rng_requests_; }
  std::vector<Value>& rng_params() { return rng_params_; }

  // Index values are only known on the device, where XLA clamps them. An
  // indexing lowering states the valid range; the program also computes
  // "all in range" and the device layer raises IndexError (naming the op) by
  // the next synchronization, before any value computed from it is seen.
  // `runtime_error`: the op's CPU kernel raises RuntimeError instead
  // (gather, scatter), so the check does too.
  struct RangeCheck {
    Value all_in_range;  // tensor<i1>
    std::string message;
    bool runtime_error = false;
    bool assertion = false;  // see assert_all
  };
  void check_in_range(const Value& index, int64_t lo, int64_t hi, const std::string& message,
                      bool runtime_error = false);
  // The same deferred raise for any condition on the values: `ok` (i1, any
  // shape) must hold everywhere (a loss's inputs within [0, 1]), else
  // RuntimeError with `message` (IndexError when `runtime_error` is false),
  // as the CPU kernel's own check.
  void check_all(const Value& ok, const std::string& message, bool runtime_error = true);
  // check_all for an op whose check is its only effect (_assert_async): the
  // program runs for it even when nothing else it computes is kept.
  void assert_all(const Value& ok, const std::string& message);
  const std::vector<RangeCheck>& range_checks() const { return range_checks_; }

  // A scatter's first result stated as what it is: argument 0 (self) with
  // `updates` combined into the elements at `coords` ([*updates.shape, R],
  // R self's rank, 1 for a 0-d self), all in self's dtype. The lowering
  // still returns the whole result (the functional and out= variants use
  // it); where the op updates self in place, the device layer scatters the
  // points into self's storage through its view instead
  // (TensorProgram::write_points): the storage's donated buffer is updated
  // in place, at a cost proportional to the update, not to the storage.
  // `overwrite`: the combiner keeps the update (moved as bits for 16-bit
  // floats).
  struct PointUpdate {
    Value coords, updates;
    hlo::ScatterCombiner combiner;
    bool overwrite = false;
  };
  void update_points_of_self(const Value& coords, const Value& updates, hlo::ScatterCombiner combiner, bool overwrite) {
    point_update_ = PointUpdate{coords, updates, std::move(combiner), overwrite};
  }
  const std::optional<PointUpdate>& point_update() const { return point_update_; }

 private:
  Value scalar_value(const ScalarArg& s, ElementType dtype, bool range_checked);

  std::vector<HostScalar> host_scalars_;
  std::vector<Value> host_scalar_params_;
  std::vector<Value> rng_params_;
  int rng_requests_ = 0;
  std::vector<RangeCheck> range_checks_;
  std::optional<PointUpdate> point_update_;
};

using LowerFn = std::vector<Value> (*)(LowerContext&);

// Declares one lowering in a family header (lower/<family>.h). Each is
// registered for its ATen overloads in csrc/device/op_table.cpp; argument
// indices follow the ATen schema.
#define TORCH_TPU_LOWERING(name) std::vector<Value> name(LowerContext& ctx);

// Thrown by a lowering for a dtype the op has no kernel for; the device layer
// raises it as NotImplementedError, as CPU and CUDA do.
struct NotImplementedForDtype : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Thrown for a Python number that overflows the dtype it is converted to;
// the device layer raises it as RuntimeError, as CPU does.
struct ScalarOverflow : std::overflow_error {
  using std::overflow_error::overflow_error;
};

// Normalize dims PyTorch-style (negative wraps).
int64_t wrap_dim(int64_t dim, int64_t rank);

// ---- shared pieces used by several op families --------------------------
// Broadcast `v` to `type.shape` and convert to `type.dtype`.
Value coerce(Builder& b, const Value& v, const TensorType& type);
Value zeros(Builder& b, const TensorType& type);
// Elementwise x != x: true where `v` is NaN.
Value is_nan(Builder& b, const Value& v);
Value full(Builder& b, double value, const TensorType& type);
// Reduction identity for a combiner in `dtype` (for max: lowest value).
Value reduce_init(Builder& b, const std::string& combiner, ElementType dtype);
// bf16/f16 -> f32, others unchanged: PyTorch's CPU and CUDA kernels compute
// reduced-precision floats in float32 (opmath_t, at::acc_type) and round once.
ElementType accumulation_type(ElementType dtype);
// A float32 product's operand at the context's matmul precision: under
// DEFAULT (torch "medium") it is rounded to bf16, so the product is one bf16
// multiply with f32 accumulation on every platform, as a TPU computes at
// DEFAULT; XLA:CPU and XLA:GPU ignore the precision attribute and would
// multiply in float32. Other dtypes and precisions pass through.
Value at_matmul_precision(const LowerContext& ctx, const Value& operand);
// For the lifetime of the guard, products of float16 inputs that a lowering
// computes in float32 run at "high" instead of DEFAULT: the float32 matmul
// precision is a setting for float32 tensors, and rounding float16 values to
// bf16 would cut their 10 mantissa bits to 7 (several times CPU's error);
// bf16x3 holds them exactly. bfloat16 values lose nothing to the rounding,
// so they keep the one pass.
class Float16InputPrecision {
 public:
  Float16InputPrecision(LowerContext& ctx, ElementType input);
  ~Float16InputPrecision();
  Float16InputPrecision(const Float16InputPrecision&) = delete;
  Float16InputPrecision& operator=(const Float16InputPrecision&) = delete;

 private:
  LowerContext& ctx_;
  std::string saved_;
};
// dot_general of `a` and `b` (converted to `out`, at the context's matmul
// precision) over the batch dims, contracting one dim of each; the result is
// in the accumulation type of `out` (batch dims, a's free dims, b's free
// dims), the caller converts.
Value contract(LowerContext& ctx, const Value& a, const Value& b, const std::vector<int64_t>& batch_a,
               const std::vector<int64_t>& batch_b, int64_t contract_a, int64_t contract_b, ElementType out);
// Matmul with PyTorch's precision: contracts a's last dim with b's dim `rhs_contract`.
Value matmul_2d(LowerContext& ctx, const Value& a, const Value& bm, ElementType out);
// The addmm family's update, beta * self + alpha * product, in the product's
// type (and/or for bool); self, beta and alpha are argument indices, an
// absent Scalar is 1. PyTorch rule: beta == 0 ignores self, so NaN and inf in
// it do not propagate. `with_self` false: alpha * product only.
Value add_scaled(LowerContext& ctx, Value product, size_t self_index, size_t beta_index, size_t alpha_index,
                 bool with_self = true);

}  // namespace torch_tpu::lower
