// CTC loss (F.ctc_loss) on tpu: _ctc_loss and _ctc_loss_backward composed
// from device ops, following CPU's kernel (aten/src/ATen/native/LossCTC.cpp):
// the forward variables alpha over the extended target l' (blanks between
// and around the labels), the backward variables beta, and the gradient
// exp(log_probs) - exp(logsumexp_{s: l'(s) = c}(alpha + beta) + nll - log_probs).
// Batch elements and target positions are vectorized; time steps run in a
// loop of ops (recorded into one program under DeferAndFuse and compile).
// Lengths are host values, as CPU's and CUDA's kernels read them; the
// _ctc_loss.Tensor overloads copy them to the host first, as CPU does.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "device/hand_written_kernels.h"

namespace torch_tpu::device {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The shape the loop works on, and l' with its masks.
struct ExtendedTargets {
  int64_t batch = 0, steps = 0, classes = 0, length = 0;  // length: 2 * max target length + 1
  at::Tensor labels;                                      // (B, L) long: l'
  at::Tensor valid;                                       // (B, L): s < 2 * target_length + 1
  at::Tensor can_skip;  // (B, L): alpha may come from s - 2 (l'(s) is a label unlike l'(s - 2))
  // (T, B, 1) masks read at step t in the time loops (through at_step).
  at::Tensor computed_at;                    // t < input_length: alpha and beta exist at t
  at::Tensor last_at;                        // t == input_length - 1
  at::Tensor input_lengths, target_lengths;  // (B) long, on the device
};

ExtendedTargets extended_targets(const at::Tensor& log_probs, const at::Tensor& targets, at::IntArrayRef input_lengths,
                                 at::IntArrayRef target_lengths, int64_t blank) {
  ExtendedTargets e;
  e.steps = log_probs.size(0);
  e.batch = log_probs.size(1);
  e.classes = log_probs.size(2);
  const int64_t max_target =
      target_lengths.empty() ? 0 : *std::max_element(target_lengths.begin(), target_lengths.end());
  e.length = 2 * max_target + 1;
  const auto long_options = targets.options().dtype(at::kLong);
  // Each element's labels, padded to max_target (CPU reads targets[b, i], or
  // the concatenated targets from the element's offset).
  std::vector<int64_t> index;
  int64_t offset = 0;
  for (int64_t b = 0; b < e.batch; ++b) {
    for (int64_t i = 0; i < max_target; ++i) {
      // An empty target reads no label (its l' is all blanks); index 0
      // stands in, as its offset may lie past the end of 1-D targets.
      const int64_t within = std::min(i, target_lengths[b] - 1);
      const int64_t at = targets.dim() == 1 ? offset + within : b * targets.size(1) + within;
      index.push_back(target_lengths[b] == 0 ? 0 : at);
    }
    offset += target_lengths[b];
  }
  at::Tensor flat = targets.reshape(-1).to(at::kLong);
  at::Tensor labels =
      flat.numel() == 0 || index.empty()
          ? at::zeros({e.batch, max_target}, long_options)
          : flat.index_select(0, at::tensor(index, at::kLong).to(targets.device())).view({e.batch, max_target});
  at::Tensor blanks = at::full({e.batch, max_target}, blank, long_options);
  e.labels = at::cat(
      {at::stack({blanks, labels}, 2).view({e.batch, 2 * max_target}), at::full({e.batch, 1}, blank, long_options)}, 1);
  e.input_lengths = at::tensor(input_lengths.vec(), at::kLong).to(targets.device());
  e.target_lengths = at::tensor(target_lengths.vec(), at::kLong).to(targets.device());
  at::Tensor position = at::arange(e.length, long_options).unsqueeze(0);
  e.valid = position.lt((2 * e.target_lengths + 1).unsqueeze(1));
  // l'(s - 2); every target empty: l' is one blank.
  at::Tensor two_back =
      e.length < 2 ? at::full({e.batch, e.length}, blank, long_options)
                   : at::cat({at::full({e.batch, 2}, blank, long_options), e.labels.narrow(1, 0, e.length - 2)}, 1);
  e.can_skip = position.ge(2) & e.labels.ne(blank) & e.labels.ne(two_back);
  at::Tensor step = at::arange(e.steps, long_options).view({e.steps, 1, 1});
  e.computed_at = step.lt(e.input_lengths.view({1, e.batch, 1}));
  e.last_at = step.eq((e.input_lengths - 1).view({1, e.batch, 1}));
  return e;
}

// Entries of v (B, L) shifted right by k along s, -inf entering.
at::Tensor shifted_right(const at::Tensor& v, int64_t k) {
  if (k >= v.size(1)) return at::full_like(v, kNegInf);
  return at::cat({at::full({v.size(0), k}, kNegInf, v.options()), v.narrow(1, 0, v.size(1) - k)}, 1);
}

// Time step t as a (1) index tensor on device, for at_step. A view at t
// (v.select(dim, t)) or a mask computed from t would bake t into the
// programs that read it, one compile per step; an uploaded index keeps one
// program for all steps.
at::Tensor step_index(int64_t t, const c10::Device& device) { return at::tensor({t}, at::kLong).to(device); }

// v's slice at the step `index` (from step_index) along dim.
at::Tensor at_step(const at::Tensor& v, int64_t dim, const at::Tensor& index) {
  return v.index_select(dim, index).squeeze(dim);
}

at::Tensor shifted_left(const at::Tensor& v, int64_t k) {
  if (k >= v.size(1)) return at::full_like(v, kNegInf);
  return at::cat({v.narrow(1, k, v.size(1) - k), at::full({v.size(0), k}, kNegInf, v.options())}, 1);
}

// log(exp(a) + exp(b) + exp(c)) as CPU computes it: around the largest, 0 if all are -inf.
at::Tensor log_add3(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  at::Tensor most = at::maximum(at::maximum(a, b), c);
  most = at::where(most.eq(kNegInf), at::zeros_like(most), most);
  return at::log(at::exp(a - most) + at::exp(b - most) + at::exp(c - most)) + most;
}

// log_probs[t, b, l'(b, s)]: (T, B, L).
at::Tensor extended_log_probs(const at::Tensor& log_probs, const ExtendedTargets& e) {
  return log_probs.gather(2, e.labels.unsqueeze(0).expand({e.steps, e.batch, e.length}));
}

void check_ctc_arguments(const at::Tensor& log_probs, const at::Tensor& targets, at::IntArrayRef input_lengths,
                         at::IntArrayRef target_lengths, int64_t blank, bool zero_infinity) {
  // CPU's checks: its meta kernel on the arguments' shapes.
  at::_ctc_loss(log_probs.to(at::kMeta), targets.to(at::kMeta), input_lengths, target_lengths, blank, zero_infinity);
  TORCH_CHECK(log_probs.dim() == 3, "ctc_loss: expected log_probs of 3 dimensions (T, N, C)");
  TORCH_CHECK(blank >= 0 && blank < log_probs.size(2), "blank must be in label range");
  for (int64_t length : input_lengths) {
    TORCH_CHECK(length <= log_probs.size(0), "Expected input_lengths to have value at most ", log_probs.size(0),
                ", but got value ", length);
  }
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                                            int64_t blank, bool zero_infinity) {
  check_ctc_arguments(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity);
  const ExtendedTargets e = extended_targets(log_probs, targets, input_lengths, target_lengths, blank);
  at::Tensor lp = extended_log_probs(log_probs, e);
  at::Tensor position = at::arange(e.length, e.labels.options()).unsqueeze(0);
  at::Tensor neg_inf = at::full({e.batch, e.length}, kNegInf, log_probs.options());
  // alpha_0: l'(0) and l'(1) (a label only if the target is not empty).
  const at::Tensor first = step_index(0, log_probs.device());
  at::Tensor alpha = at::where(position.lt(2) & e.valid, at_step(lp, 0, first), neg_inf);
  at::Tensor final_alpha = at::where(at_step(e.last_at, 0, first), alpha, neg_inf);
  std::vector<at::Tensor> alphas{alpha};
  for (int64_t t = 1; t < e.steps; ++t) {
    const at::Tensor step = step_index(t, log_probs.device());
    at::Tensor skip = at::where(e.can_skip, shifted_right(alpha, 2), neg_inf);
    at::Tensor next = log_add3(alpha, shifted_right(alpha, 1), skip) + at_step(lp, 0, step);
    next = at::where(e.valid, next, neg_inf);
    // Past an element's input length its alpha is not computed (CPU leaves it unset; here -inf).
    alpha = at::where(at_step(e.computed_at, 0, step), next, neg_inf);
    final_alpha = at::where(at_step(e.last_at, 0, step), alpha, final_alpha);
    alphas.push_back(alpha);
  }
  // -log(alpha_T(2 l) + alpha_T(2 l - 1)), the second only for a non-empty target.
  at::Tensor end = (2 * e.target_lengths).unsqueeze(1);
  at::Tensor l1 = final_alpha.gather(1, end).squeeze(1);
  at::Tensor l2 = at::where(e.target_lengths.gt(0), final_alpha.gather(1, (end - 1).clamp_min(0)).squeeze(1),
                            at::full_like(l1, kNegInf));
  at::Tensor most = at::maximum(l1, l2);
  most = at::where(most.eq(kNegInf), at::zeros_like(most), most);
  at::Tensor nll = -(at::log(at::exp(l1 - most) + at::exp(l2 - most)) + most);
  return {nll, at::stack(alphas, 1)};
}

at::Tensor ctc_loss_backward(const at::Tensor& grad_out, const at::Tensor& log_probs, const at::Tensor& targets,
                             at::IntArrayRef input_lengths, at::IntArrayRef target_lengths, const at::Tensor& nll,
                             const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  const ExtendedTargets e = extended_targets(log_probs, targets, input_lengths, target_lengths, blank);
  at::Tensor lp = extended_log_probs(log_probs, e);
  at::Tensor position = at::arange(e.length, e.labels.options()).unsqueeze(0);
  at::Tensor neg_inf = at::full({e.batch, e.length}, kNegInf, log_probs.options());
  // beta at an element's last step: l'(2 l) and l'(2 l - 1).
  at::Tensor end = (2 * e.target_lengths).unsqueeze(1);
  at::Tensor ends = position.eq(end) | (position.eq(end - 1) & e.target_lengths.gt(0).unsqueeze(1));
  at::Tensor can_skip_ahead = shifted_left(e.can_skip.to(log_probs.scalar_type()), 2).gt(0);
  // The gradient's logsumexp over the s with l'(s) = c: (B, L, C) one-hot.
  at::Tensor is_class = e.labels.unsqueeze(2).eq(at::arange(e.classes, e.labels.options()).view({1, 1, e.classes}));
  is_class = is_class & e.valid.unsqueeze(2);
  at::Tensor beta = neg_inf;
  std::vector<at::Tensor> grads(e.steps);
  const at::Tensor scale = grad_out.unsqueeze(1);
  for (int64_t t = e.steps - 1; t >= 0; --t) {
    const at::Tensor step = step_index(t, log_probs.device());
    at::Tensor lp_t = at_step(lp, 0, step);
    at::Tensor skip = at::where(can_skip_ahead, shifted_left(beta, 2), neg_inf);
    at::Tensor inner = at::where(e.valid, log_add3(beta, shifted_left(beta, 1), skip) + lp_t, neg_inf);
    at::Tensor at_end = at::where(ends, lp_t, neg_inf);
    // Before the last step beta comes from t + 1; past it, -inf.
    at::Tensor before_last = at_step(e.computed_at, 0, step) & at_step(e.last_at, 0, step).logical_not();
    beta = at::where(at_step(e.last_at, 0, step), at_end, at::where(before_last, inner, neg_inf));
    at::Tensor both = (at_step(log_alpha, 1, step) + beta).unsqueeze(2).expand({e.batch, e.length, e.classes});
    at::Tensor by_class = at::logsumexp(at::where(is_class, both, at::full_like(both, kNegInf)), {1});
    at::Tensor lp_full = at_step(log_probs, 0, step);
    at::Tensor grad = (at::exp(lp_full) - at::exp(by_class + nll.unsqueeze(1) - lp_full)) * scale;
    grad = at::where(at_step(e.computed_at, 0, step), grad, at::zeros_like(grad));
    if (zero_infinity)
      grad = at::where(nll.eq(std::numeric_limits<double>::infinity()).unsqueeze(1), at::zeros_like(grad), grad);
    grads[t] = grad;
  }
  return at::stack(grads, 0);
}

std::vector<int64_t> host_lengths(const at::Tensor& lengths) {
  at::Tensor l = lengths.to(at::kCPU, at::kLong).contiguous();
  return {l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel()};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  TORCH_CHECK(isIntegralType(input_lengths.scalar_type(), /*includeBool=*/false), "input_lengths must be integral");
  TORCH_CHECK(isIntegralType(target_lengths.scalar_type(), /*includeBool=*/false), "target_lengths must be integral");
  return at::_ctc_loss(log_probs, targets, host_lengths(input_lengths), host_lengths(target_lengths), blank,
                       zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                    const at::Tensor& nll, const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  return at::_ctc_loss_backward(grad, log_probs, targets, host_lengths(input_lengths), host_lengths(target_lengths),
                                nll, log_alpha, blank, zero_infinity);
}

}  // namespace

torch::CppFunction ctc_loss_kernel() { return torch::CppFunction(TORCH_FN(ctc_loss)); }
torch::CppFunction ctc_loss_tensor_kernel() { return torch::CppFunction(TORCH_FN(ctc_loss_tensor)); }
torch::CppFunction ctc_loss_backward_kernel() { return torch::CppFunction(TORCH_FN(ctc_loss_backward)); }
torch::CppFunction ctc_loss_backward_tensor_kernel() { return torch::CppFunction(TORCH_FN(ctc_loss_backward_tensor)); }

}  // namespace torch_tpu::device
