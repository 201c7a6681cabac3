// _foreach_* ops: one lowering over the whole list. Element i of every list
// argument goes through the single-tensor lowering (so type promotion,
// integer and bf16 rules are exactly those of add, mul, lerp ...), all into
// the same program: torch.optim's foreach step becomes a handful of programs
// instead of one per parameter and op. The fused optimizer steps follow
// PyTorch's CPU kernels (ATen/native/cpu/FusedAdamKernel.cpp,
// FusedSGDKernel.cpp): opmath arithmetic, one rounding per stored state.
#include "lower/foreach.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include "lower/common/scalars.h"
#include "lower/elementwise.h"
#include "lower/reduce.h"

namespace torch_tpu::lower {

namespace {

// Number of elements: the length of the first Tensor[] argument.
size_t list_length(const std::vector<Arg>& args) {
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::TensorList) return a.tensors.size();
  }
  throw std::invalid_argument("foreach: no tensor list argument");
}

// Element i of a Scalar[] argument (the device layer passes all-integer
// lists as ints, others as doubles).
Arg scalar_element(const Arg& list, size_t i) {
  Arg a;
  a.kind = Arg::Kind::Scalar;
  if (list.kind == Arg::Kind::IntList) {
    a.scalar.kind = ScalarArg::Kind::Int;
    a.scalar.i = list.ints.at(i);
  } else {
    a.scalar.kind = ScalarArg::Kind::Float;
    a.scalar.f = list.doubles.at(i);
    if (i < list.double_origins.size()) a.scalar.origin = list.double_origins[i];
  }
  return a;
}

// Element i of a foreach op's arguments: each Tensor[] gives its i-th
// tensor, each Scalar[] its i-th number; other arguments pass through.
std::vector<Arg> element_args(const std::vector<Arg>& args, size_t i) {
  std::vector<Arg> out;
  out.reserve(args.size());
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::TensorList) {
      Arg t;
      t.kind = a.tensors.at(i) ? Arg::Kind::Tensor : Arg::Kind::None;
      t.tensor = a.tensors.at(i);
      out.push_back(std::move(t));
    } else if (a.kind == Arg::Kind::IntList || a.kind == Arg::Kind::DoubleList) {
      out.push_back(scalar_element(a, i));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// Result type of element i: PyTorch's (functional ops), else self's (in-place
// ops return nothing, so their meta kernel gives no types).
TensorType element_type(const std::vector<Arg>& args, const std::vector<TensorType>& outs, size_t i, size_t n) {
  if (outs.size() == n) return outs[i];
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::TensorList && a.tensors.at(i)) return a.tensors[i]->type;
  }
  throw std::invalid_argument("foreach: no result type for element " + std::to_string(i));
}

// Lowers element after element with `ctx` showing the element's arguments
// and result type; scalars, random state and checks land in the one program.
class PerElement {
 public:
  explicit PerElement(LowerContext& ctx)
      : ctx_(ctx), args_(std::move(ctx.args)), outs_(std::move(ctx.out_types)), n_(list_length(args_)) {}
  ~PerElement() {
    ctx_.args = std::move(args_);
    ctx_.out_types = std::move(outs_);
  }
  size_t size() const { return n_; }
  const std::vector<Arg>& args() const { return args_; }
  TensorType out_type(size_t i) const { return element_type(args_, outs_, i, n_); }

  Value run(LowerFn fn, size_t i, std::vector<Arg> args) {
    ctx_.args = std::move(args);
    ctx_.out_types = {out_type(i)};
    return fn(ctx_).at(0);
  }

 private:
  LowerContext& ctx_;
  std::vector<Arg> args_;
  std::vector<TensorType> outs_;
  size_t n_;
};

std::vector<Value> map_elements(LowerContext& ctx, LowerFn fn) {
  PerElement each(ctx);
  std::vector<Value> results;
  for (size_t i = 0; i < each.size(); ++i) results.push_back(each.run(fn, i, element_args(each.args(), i)));
  return results;
}

Arg tensor_arg(const std::optional<Value>& v) {
  Arg a;
  a.kind = v ? Arg::Kind::Tensor : Arg::Kind::None;
  a.tensor = v;
  return a;
}

}  // namespace

#define TORCH_TPU_FOREACH(op) \
  std::vector<Value> foreach_##op(LowerContext& ctx) { return map_elements(ctx, op); }
TORCH_TPU_FOREACH(abs)
TORCH_TPU_FOREACH(add)
TORCH_TPU_FOREACH(addcdiv)
TORCH_TPU_FOREACH(addcmul)
TORCH_TPU_FOREACH(ceil)
TORCH_TPU_FOREACH(clamp_max)
TORCH_TPU_FOREACH(clamp_min)
TORCH_TPU_FOREACH(cos)
TORCH_TPU_FOREACH(div)
TORCH_TPU_FOREACH(erf)
TORCH_TPU_FOREACH(exp)
TORCH_TPU_FOREACH(expm1)
TORCH_TPU_FOREACH(floor)
TORCH_TPU_FOREACH(lerp)
TORCH_TPU_FOREACH(log)
TORCH_TPU_FOREACH(log1p)
TORCH_TPU_FOREACH(log2)
TORCH_TPU_FOREACH(maximum)
TORCH_TPU_FOREACH(minimum)
TORCH_TPU_FOREACH(mul)
TORCH_TPU_FOREACH(neg)
TORCH_TPU_FOREACH(pow)
TORCH_TPU_FOREACH(reciprocal)
TORCH_TPU_FOREACH(round)
TORCH_TPU_FOREACH(rsqrt)
TORCH_TPU_FOREACH(sigmoid)
TORCH_TPU_FOREACH(sign)
TORCH_TPU_FOREACH(sin)
TORCH_TPU_FOREACH(sqrt)
TORCH_TPU_FOREACH(sub)
TORCH_TPU_FOREACH(tan)
TORCH_TPU_FOREACH(tanh)
TORCH_TPU_FOREACH(trunc)
#undef TORCH_TPU_FOREACH

namespace {

// The tensors of list argument `list`, each converted and broadcast to its
// result.
std::vector<Value> coerced_list(LowerContext& ctx, size_t list) {
  PerElement each(ctx);
  std::vector<Value> results;
  for (size_t i = 0; i < each.size(); ++i)
    results.push_back(coerce(ctx.b, *each.args()[list].tensors.at(i), each.out_type(i)));
  return results;
}

}  // namespace

// _foreach_clone(self[]) -> Tensor[].
std::vector<Value> foreach_clone(LowerContext& ctx) { return coerced_list(ctx, 0); }

// _foreach_copy_(self[], src[], non_blocking) and _foreach_copy: src_i
// converted and broadcast to self_i, as copy_.
std::vector<Value> foreach_copy(LowerContext& ctx) { return coerced_list(ctx, 1); }

// _foreach_zero_(self[]) and _foreach_zero.
std::vector<Value> foreach_zero(LowerContext& ctx) {
  PerElement each(ctx);
  std::vector<Value> results;
  for (size_t i = 0; i < each.size(); ++i) results.push_back(zeros(ctx.b, each.out_type(i)));
  return results;
}

// _foreach_max(self[]): max over all elements of each tensor.
std::vector<Value> foreach_max(LowerContext& ctx) {
  PerElement each(ctx);
  std::vector<Value> results;
  for (size_t i = 0; i < each.size(); ++i)
    results.push_back(each.run(max_all, i, {tensor_arg(each.args()[0].tensors.at(i))}));
  return results;
}

// _foreach_norm(self[], ord, dtype?) = linalg_vector_norm(self_i, ord, dim=None, keepdim=False, dtype).
std::vector<Value> foreach_norm(LowerContext& ctx) {
  PerElement each(ctx);
  std::vector<Value> results;
  const Arg none;
  Arg keepdim;
  keepdim.kind = Arg::Kind::Bool;
  for (size_t i = 0; i < each.size(); ++i) {
    const std::vector<Arg>& a = each.args();
    std::vector<Arg> args = {tensor_arg(a[0].tensors.at(i)), a.size() > 1 ? a[1] : none, none, keepdim,
                             a.size() > 2 ? a[2] : none};
    results.push_back(each.run(linalg_vector_norm, i, std::move(args)));
  }
  return results;
}

// ---- fused optimizer steps ------------------------------------------------------
namespace {

// Hyperparameters as 0-d values, made once per compute dtype.
class Hypers {
 public:
  Hypers(LowerContext& ctx) : ctx_(ctx) {}
  Value get(const std::string& name, double v, ElementType dtype) {
    auto key = std::make_pair(name, dtype);
    auto it = values_.find(key);
    if (it == values_.end()) it = values_.emplace(key, host_number(ctx_, v, dtype)).first;
    return it->second;
  }

 private:
  LowerContext& ctx_;
  std::map<std::pair<std::string, ElementType>, Value> values_;
};

struct Elementwise {
  Builder& b;
  Shape shape;
  Value bc(const Value& scalar) const { return b.broadcast_to(scalar, shape); }
  Value add(const Value& x, const Value& y) const { return b.binary("add", x, y); }
  Value sub(const Value& x, const Value& y) const { return b.binary("subtract", x, y); }
  Value mul(const Value& x, const Value& y) const { return b.binary("multiply", x, y); }
  Value div(const Value& x, const Value& y) const { return b.binary("divide", x, y); }
};

// The learning rate: a float (runtime input) or a tensor (tensor_lr overloads).
Value learning_rate(LowerContext& ctx, Hypers& h, size_t index, ElementType dtype) {
  const Arg& a = ctx.args.at(index);
  if (a.kind == Arg::Kind::Tensor) return ctx.b.reshape(ctx.b.convert(ctx.tensor(index), dtype), {});
  return h.get("lr", ctx.double_arg(index), dtype);
}

// found_inf == 1 skips the whole step (FusedAdam.cpp / FusedSGD.cpp return
// early): every written tensor keeps its value.
void skip_if_found_inf(LowerContext& ctx, size_t index, std::vector<Value>& updated, const std::vector<Value>& old) {
  if (!ctx.has(index)) return;
  Builder& b = ctx.b;
  Value inf = b.reshape(b.convert(ctx.tensor(index), ElementType::F32), {});
  Value skip = b.compare(inf, b.constant(1, ElementType::F32), hlo::CompareDirection::EQ);
  for (size_t k = 0; k < updated.size(); ++k) {
    updated[k] = b.select(b.broadcast_to(skip, old[k].shape()), old[k], b.convert(updated[k], old[k].dtype()));
  }
}

// The unscaled gradient: grad / grad_scale when a scale is given (the
// kernels store it back into grad).
Value unscaled_grad(LowerContext& ctx, size_t scale_index, const Value& g) {
  if (!ctx.has(scale_index)) return g;
  Builder& b = ctx.b;
  Value scale = b.reshape(b.convert(ctx.tensor(scale_index), g.dtype()), {});
  return b.binary("divide", g, b.broadcast_to(scale, g.shape()));
}

// 1 - beta^step = -expm1(step * log(beta)): accurate in float32 where the
// kernels use double (1 - 0.999 rounds badly in float32).
Value bias_correction(LowerContext& ctx, Hypers& h, const char* name, double beta, const Value& step, ElementType t) {
  Builder& b = ctx.b;
  Value log_beta = h.get(name, std::log(beta), t);
  Value s = b.reshape(b.convert(step, t), {});
  return b.unary("negate", b.unary("exponential_minus_one", b.binary("multiply", s, log_beta)));
}

enum class AdamMode { Original, AdamW };

// _fused_adam[w]_(self[], grads[], exp_avgs[], exp_avg_sqs[], max_exp_avg_sqs[],
// state_steps[], *, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
// grad_scale?, found_inf?). Results: every written list, in argument order.
std::vector<Value> fused_adam_step(LowerContext& ctx, AdamMode mode) {
  Builder& b = ctx.b;
  const auto& params = ctx.args.at(0).tensors;
  const auto& grads = ctx.args.at(1).tensors;
  const auto& exp_avgs = ctx.args.at(2).tensors;
  const auto& exp_avg_sqs = ctx.args.at(3).tensors;
  const auto& max_sqs = ctx.args.at(4).tensors;
  const auto& steps = ctx.args.at(5).tensors;
  const double beta1 = ctx.double_arg(7), beta2 = ctx.double_arg(8), wd = ctx.double_arg(9), eps = ctx.double_arg(10);
  const bool amsgrad = ctx.bool_arg(11), maximize = ctx.bool_arg(12);
  const size_t n = params.size();
  Hypers h(ctx);
  std::vector<Value> new_params, new_grads, new_avgs, new_sqs, new_maxes;
  for (size_t i = 0; i < n; ++i) {
    const Value& param = *params.at(i);
    const ElementType t = accumulation_type(param.dtype());
    Elementwise e{b, param.shape()};
    Value p = b.convert(param, t), g = unscaled_grad(ctx, 13, b.convert(*grads.at(i), t));
    Value m = b.convert(*exp_avgs.at(i), t), v = b.convert(*exp_avg_sqs.at(i), t);
    Value lr = learning_rate(ctx, h, 6, t);
    new_grads.push_back(ctx.has(13) ? g : *grads.at(i));
    if (maximize) g = b.unary("negate", g);
    if (wd != 0) {
      if (mode == AdamMode::Original) {
        g = e.add(g, e.mul(p, e.bc(h.get("wd", wd, t))));
      } else {
        // 1 - lr * weight_decay, in double on the host as the kernel does when lr is a number.
        const bool lr_tensor = ctx.args.at(6).kind == Arg::Kind::Tensor;
        Value decay = lr_tensor ? b.binary("subtract", b.constant(1, t), b.binary("multiply", lr, h.get("wd", wd, t)))
                                : h.get("decay", 1 - ctx.double_arg(6) * wd, t);
        p = e.mul(p, e.bc(decay));
      }
    }
    // exp_avg.lerp_(grad, 1 - beta1), at::native::lerp's two-sided form.
    const double w = 1 - beta1;
    m = std::abs(w) < 0.5 ? e.add(m, e.mul(e.bc(h.get("w", w, t)), e.sub(g, m)))
                          : e.sub(g, e.mul(e.sub(g, m), e.bc(h.get("1-w", 1 - w, t))));
    v = e.add(e.mul(v, e.bc(h.get("beta2", beta2, t))), e.mul(e.mul(e.bc(h.get("1-beta2", 1 - beta2, t)), g), g));
    Value vmax = v;
    if (amsgrad) {
      vmax = b.binary("maximum", b.convert(*max_sqs.at(i), t), v);
      new_maxes.push_back(vmax);
    } else if (i < max_sqs.size()) {
      new_maxes.push_back(*max_sqs[i]);
    }
    Value step_size = b.binary("divide", lr, bias_correction(ctx, h, "log_beta1", beta1, *steps.at(i), t));
    Value bc2_sqrt = b.unary("sqrt", bias_correction(ctx, h, "log_beta2", beta2, *steps.at(i), t));
    Value denom = e.add(e.div(b.unary("sqrt", vmax), e.bc(bc2_sqrt)), e.bc(h.get("eps", eps, t)));
    p = e.add(p, e.div(e.mul(e.bc(b.unary("negate", step_size)), m), denom));
    new_params.push_back(p);
    new_avgs.push_back(m);
    new_sqs.push_back(v);
  }
  std::vector<Value> results, old;
  for (auto* list : {&new_params, &new_grads, &new_avgs, &new_sqs, &new_maxes})
    results.insert(results.end(), list->begin(), list->end());
  for (const auto* list : {&params, &grads, &exp_avgs, &exp_avg_sqs, &max_sqs}) {
    for (size_t i = 0; i < list->size(); ++i) old.push_back(*list->at(i));
  }
  skip_if_found_inf(ctx, 14, results, old);
  return results;
}

}  // namespace

std::vector<Value> fused_adam(LowerContext& ctx) { return fused_adam_step(ctx, AdamMode::Original); }
std::vector<Value> fused_adamw(LowerContext& ctx) { return fused_adam_step(ctx, AdamMode::AdamW); }

// _fused_sgd_(self[], grads[], momentum_buffer_list[], *, weight_decay,
// momentum, lr, dampening, nesterov, maximize, is_first_step, grad_scale?,
// found_inf?). Results: params, grads, momentum buffers.
std::vector<Value> fused_sgd(LowerContext& ctx) {
  Builder& b = ctx.b;
  const auto& params = ctx.args.at(0).tensors;
  const auto& grads = ctx.args.at(1).tensors;
  const auto& bufs = ctx.args.at(2).tensors;
  const double wd = ctx.double_arg(3), momentum = ctx.double_arg(4), dampening = ctx.double_arg(6);
  const bool nesterov = ctx.bool_arg(7), maximize = ctx.bool_arg(8), first = ctx.bool_arg(9);
  Hypers h(ctx);
  std::vector<Value> new_params, new_grads, new_bufs;
  for (size_t i = 0; i < params.size(); ++i) {
    const Value& param = *params.at(i);
    const ElementType t = accumulation_type(param.dtype());
    Elementwise e{b, param.shape()};
    Value p = b.convert(param, t), g = unscaled_grad(ctx, 10, b.convert(*grads.at(i), t));
    new_grads.push_back(ctx.has(10) ? g : *grads.at(i));
    if (maximize) g = b.unary("negate", g);
    if (wd != 0) g = e.add(e.mul(p, e.bc(h.get("wd", wd, t))), g);
    if (momentum != 0) {
      Value mom = e.bc(h.get("momentum", momentum, t));
      Value buf =
          first ? g
                : e.add(e.mul(e.bc(h.get("1-dampening", 1 - dampening, t)), g), e.mul(b.convert(*bufs.at(i), t), mom));
      new_bufs.push_back(buf);
      g = nesterov ? e.add(e.mul(buf, mom), g) : buf;
    } else if (i < bufs.size()) {
      new_bufs.push_back(*bufs[i]);
    }
    Value lr = learning_rate(ctx, h, 5, t);
    new_params.push_back(e.add(p, e.mul(g, e.bc(b.unary("negate", lr)))));
  }
  std::vector<Value> results, old;
  for (auto* list : {&new_params, &new_grads, &new_bufs}) results.insert(results.end(), list->begin(), list->end());
  for (const auto* list : {&params, &grads, &bufs}) {
    for (size_t i = 0; i < list->size(); ++i) old.push_back(*list->at(i));
  }
  skip_if_found_inf(ctx, 11, results, old);
  return results;
}

}  // namespace torch_tpu::lower
