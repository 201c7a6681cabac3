#include "builder.h"

#include "hlo/foreign_module.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace torch_tpu::hlo {

const char* mlir_name(ElementType t) {
  switch (t) {
    case ElementType::Pred:
      return "i1";
    case ElementType::S8:
      return "i8";
    case ElementType::S16:
      return "i16";
    case ElementType::S32:
      return "i32";
    case ElementType::S64:
      return "i64";
    case ElementType::U8:
      return "ui8";
    case ElementType::U16:
      return "ui16";
    case ElementType::U32:
      return "ui32";
    case ElementType::U64:
      return "ui64";
    case ElementType::F16:
      return "f16";
    case ElementType::BF16:
      return "bf16";
    case ElementType::F32:
      return "f32";
    case ElementType::F64:
      return "f64";
    case ElementType::C64:
      return "complex<f32>";
    case ElementType::C128:
      return "complex<f64>";
  }
  return "?";
}

bool is_float(ElementType t) {
  return t == ElementType::F16 || t == ElementType::BF16 || t == ElementType::F32 || t == ElementType::F64;
}
bool is_unsigned(ElementType t) {
  return t == ElementType::U8 || t == ElementType::U16 || t == ElementType::U32 || t == ElementType::U64;
}
bool is_integer(ElementType t) {
  return is_unsigned(t) || t == ElementType::S8 || t == ElementType::S16 || t == ElementType::S32 ||
         t == ElementType::S64;
}
bool is_complex(ElementType t) { return t == ElementType::C64 || t == ElementType::C128; }
ElementType complex_part_type(ElementType t) {
  if (t == ElementType::C64) return ElementType::F32;
  if (t == ElementType::C128) return ElementType::F64;
  return t;
}
ElementType complex_type(ElementType part) {
  if (part == ElementType::F32) return ElementType::C64;
  if (part == ElementType::F64) return ElementType::C128;
  throw std::invalid_argument(std::string("no complex type has ") + mlir_name(part) + " parts");
}

int64_t byte_size(ElementType t) {
  switch (t) {
    case ElementType::Pred:
    case ElementType::S8:
    case ElementType::U8:
      return 1;
    case ElementType::S16:
    case ElementType::U16:
    case ElementType::F16:
    case ElementType::BF16:
      return 2;
    case ElementType::S32:
    case ElementType::U32:
    case ElementType::F32:
      return 4;
    case ElementType::S64:
    case ElementType::U64:
    case ElementType::F64:
    case ElementType::C64:
      return 8;
    case ElementType::C128:
      return 16;
  }
  return 0;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  return s + mlir_name(dtype) + ">";
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Builder::dims_attr(const std::vector<int64_t>& dims) {
  std::string s = "array<i64";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : ": ") + std::to_string(dims[i]);
  return s + ">";
}

std::string Builder::padding_attr(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  std::string s = "dense<[";
  for (size_t i = 0; i < lo.size(); ++i)
    s += (i ? ", [" : "[") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  return s + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

std::string Builder::fresh() { return "%" + std::to_string(next_++); }

void Builder::emit(const std::string& line) {
  blocks_.back().append(indent_ * 2, ' ');
  blocks_.back() += line;
  blocks_.back() += '\n';
}

Value Builder::parameter(const TensorType& type) {
  params_.push_back({type, false});
  return {"%arg" + std::to_string(params_.size() - 1), type};
}

void Builder::mark_donated(const Value& param, int output) {
  size_t index = std::stoul(param.name.substr(4));
  params_.at(index).donated = true;
  params_.at(index).output = output;
}

static std::string type_list(const std::vector<Value>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].type.str();
  return s;
}

static std::string type_list(const std::vector<TensorType>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s;
}

static std::string name_list(const std::vector<Value>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].name;
  return s;
}

static std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// "name = [..], " for a non-empty list: the StableHLO printer leaves empty
// dimension lists out of gather and scatter dimension numbers.
static std::string dims_field(const char* name, const std::vector<int64_t>& dims) {
  return dims.empty() ? "" : std::string(name) + " = " + int_list(dims) + ", ";
}

static std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

static std::vector<int64_t> all_dims_but(int64_t rank, int64_t dim) {
  std::vector<int64_t> r;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) r.push_back(d);
  }
  return r;
}

static std::string results_sig(const std::vector<TensorType>& results) {
  return results.size() == 1 ? results[0].str() : "(" + type_list(results) + ")";
}

std::vector<Value> Builder::op_multi(const std::string& name, const std::vector<Value>& operands,
                                     const std::vector<TensorType>& results, const std::string& attrs) {
  std::string id = fresh();
  std::string lhs = results.size() == 1 ? id : id + ":" + std::to_string(results.size());
  emit(lhs + " = \"stablehlo." + name + "\"(" + name_list(operands) + ")" + (attrs.empty() ? "" : " {" + attrs + "}") +
       " : (" + type_list(operands) + ") -> " + results_sig(results));
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    out.push_back({results.size() == 1 ? id : id + "#" + std::to_string(i), results[i]});
  }
  return out;
}

Value Builder::op(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
                  const std::string& attrs) {
  return op_multi(name, operands, {result}, attrs)[0];
}

std::vector<Value> Builder::op_with_region(const std::string& name, const std::vector<Value>& operands,
                                           const std::vector<TensorType>& results, const std::string& attrs,
                                           const std::vector<TensorType>& block_args, const RegionBody& body) {
  std::string id = fresh();
  std::vector<Value> args;
  std::string header = "^bb0(";
  for (size_t i = 0; i < block_args.size(); ++i) {
    Value a{fresh(), block_args[i]};
    header += (i ? ", " : "") + a.name + ": " + a.type.str();
    args.push_back(a);
  }
  header += "):";
  blocks_.emplace_back();
  indent_ += 1;
  std::vector<Value> ret = body(*this, args);
  emit("\"stablehlo.return\"(" + name_list(ret) + ") : (" + type_list(ret) + ") -> ()");
  indent_ -= 1;
  std::string region = blocks_.back();
  blocks_.pop_back();
  std::string lhs = results.size() == 1 ? id : id + ":" + std::to_string(results.size());
  std::string pad(indent_ * 2, ' ');
  blocks_.back() += pad + lhs + " = \"stablehlo." + name + "\"(" + name_list(operands) + ") ({\n" + pad + header +
                    "\n" + region + pad + "})" + (attrs.empty() ? "" : " {" + attrs + "}") + " : (" +
                    type_list(operands) + ") -> " + results_sig(results) + "\n";
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    out.push_back({results.size() == 1 ? id : id + "#" + std::to_string(i), results[i]});
  }
  return out;
}

static std::string float_literal(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  std::string s(buf);
  // MLIR's float literals need a decimal point, also before an exponent
  // ("1e+17" does not parse, "1.0e+17" does).
  if (s.find('.') == std::string::npos) {
    size_t e = s.find_first_of("eE");
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

Value Builder::constant(double value, ElementType dtype) {
  TensorType t{dtype, {}};
  if (is_float(dtype) || is_complex(dtype)) {
    if (!std::isfinite(value)) {
      // MLIR takes non-finite floats only as bit patterns; build them in f32.
      float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      char buf[16];
      std::snprintf(buf, sizeof(buf), "0x%08X", bits);
      Value v = op("constant", {}, {ElementType::F32, {}}, std::string("value = dense<") + buf + "> : tensor<f32>");
      return convert(v, dtype);
    }
    std::string lit = is_complex(dtype) ? "(" + float_literal(value) + ", 0.0)" : float_literal(value);
    return op("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
  }
  if (dtype == ElementType::Pred)
    return op("constant", {}, t, std::string("value = dense<") + (value != 0 ? "true" : "false") + "> : tensor<i1>");
  return constant_int(static_cast<int64_t>(value), dtype);
}

Value Builder::constant_int(int64_t value, ElementType dtype) {
  if (!is_integer(dtype)) {
    if (dtype == ElementType::Pred) return constant(value != 0 ? 1.0 : 0.0, dtype);
    return constant(static_cast<double>(value), dtype);
  }
  TensorType t{dtype, {}};
  std::string lit = is_unsigned(dtype) ? std::to_string(static_cast<uint64_t>(value)) : std::to_string(value);
  return op("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

Value Builder::constant_bits_like(const std::string& literal, ElementType dtype) {
  TensorType t{dtype, {}};
  return op("constant", {}, t, "value = dense<" + literal + "> : " + t.str());
}

Value Builder::constant_vector(const std::vector<double>& values, ElementType dtype) {
  TensorType t{dtype, {static_cast<int64_t>(values.size())}};
  std::string lit;
  for (size_t i = 0; i < values.size(); ++i) lit += (i ? ", " : "") + float_literal(values[i]);
  return op("constant", {}, t, "value = dense<[" + lit + "]> : " + t.str());
}

Value Builder::constant_indices(const std::vector<int64_t>& values) {
  TensorType t{ElementType::S64, {static_cast<int64_t>(values.size())}};
  std::string lit;
  for (size_t i = 0; i < values.size(); ++i) lit += (i ? ", " : "") + std::to_string(values[i]);
  return op("constant", {}, t, "value = dense<[" + lit + "]> : " + t.str());
}

Value Builder::splat(double value, const TensorType& type) {
  return broadcast_in_dim(constant(value, type.dtype), type.shape, {});
}

Value Builder::convert(const Value& v, ElementType dtype) {
  if (v.dtype() == dtype) return v;
  if (dtype == ElementType::Pred) {
    // PyTorch's bool conversion is "!= 0", not truncation.
    return compare(v, splat(0, v.type), CompareDirection::NE);
  }
  return op("convert", {v}, {dtype, v.shape()});
}

Value Builder::bitcast_convert(const Value& v, const TensorType& type) { return op("bitcast_convert", {v}, type); }

Value Builder::reshape(const Value& v, const Shape& shape) {
  if (v.shape() == shape) return v;
  return op("reshape", {v}, {v.dtype(), shape});
}

Value Builder::broadcast_in_dim(const Value& v, const Shape& shape, const std::vector<int64_t>& dims) {
  if (v.shape() == shape) {
    bool identity = true;
    for (size_t i = 0; i < dims.size(); ++i) identity &= dims[i] == static_cast<int64_t>(i);
    if (identity) return v;
  }
  return op("broadcast_in_dim", {v}, {v.dtype(), shape}, "broadcast_dimensions = " + dims_attr(dims));
}

Value Builder::broadcast_to(const Value& v, const Shape& shape) {
  if (v.shape() == shape) return v;
  int64_t lead = static_cast<int64_t>(shape.size()) - v.rank();
  if (lead < 0) throw std::invalid_argument("broadcast_to: target rank smaller than operand rank");
  // Size-1 dims that must grow are dropped first (broadcast_in_dim needs
  // operand dim == 1 or == target dim, which holds here, so keep them).
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v.rank(); ++i) dims.push_back(lead + i);
  return broadcast_in_dim(v, shape, dims);
}

Value Builder::transpose(const Value& v, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return v;
  Shape shape;
  for (int64_t p : perm) shape.push_back(v.shape()[p]);
  return op("transpose", {v}, {v.dtype(), shape}, "permutation = " + dims_attr(perm));
}

Value Builder::slice(const Value& v, const Shape& start, const Shape& limit, const Shape& strides) {
  Shape shape;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    shape.push_back(limit[i] <= start[i] ? 0 : (limit[i] - start[i] + strides[i] - 1) / strides[i]);
    identity &= start[i] == 0 && limit[i] == v.shape()[i] && strides[i] == 1;
  }
  if (identity) return v;
  return op("slice", {v}, {v.dtype(), shape},
            "start_indices = " + dims_attr(start) + ", limit_indices = " + dims_attr(limit) +
                ", strides = " + dims_attr(strides));
}

Value Builder::concatenate(const std::vector<Value>& vs, int64_t dim) {
  if (vs.size() == 1) return vs[0];
  Shape shape = vs.at(0).shape();
  shape[dim] = 0;
  for (const auto& v : vs) shape[dim] += v.shape()[dim];
  return op("concatenate", vs, {vs[0].dtype(), shape}, "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::pad(const Value& v, const Value& pad_value, const Shape& low, const Shape& high, const Shape& interior) {
  Shape shape;
  for (int64_t i = 0; i < v.rank(); ++i) {
    int64_t d = v.shape()[i];
    shape.push_back(low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0));
  }
  return op("pad", {v, pad_value}, {v.dtype(), shape},
            "edge_padding_low = " + dims_attr(low) + ", edge_padding_high = " + dims_attr(high) +
                ", interior_padding = " + dims_attr(interior));
}

Value Builder::iota(const TensorType& type, int64_t dim) {
  return op("iota", {}, type, "iota_dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::reverse(const Value& v, const std::vector<int64_t>& dims) {
  return op("reverse", {v}, v.type, "dimensions = " + dims_attr(dims));
}

Value Builder::dynamic_update_slice(const Value& base, const Value& update, const std::vector<Value>& starts) {
  std::vector<Value> operands{base, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op("dynamic_update_slice", operands, base.type);
}

Value Builder::dynamic_slice(const Value& operand, const std::vector<Value>& starts, const Shape& sizes) {
  std::vector<Value> operands{operand};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op("dynamic_slice", operands, {operand.dtype(), sizes}, "slice_sizes = " + dims_attr(sizes));
}

GatherDims GatherDims::points(int64_t rank, int64_t index_vector_dim) {
  GatherDims g;
  g.collapsed_slice_dims = range(rank);
  g.start_index_map = range(rank);
  g.index_vector_dim = index_vector_dim;
  g.slice_sizes.assign(rank, 1);
  return g;
}

Value Builder::gather(const Value& operand, const Value& indices, const GatherDims& dims, const Shape& result) {
  std::string attrs = "dimension_numbers = #stablehlo.gather<" + dims_field("offset_dims", dims.offset_dims) +
                      dims_field("collapsed_slice_dims", dims.collapsed_slice_dims) +
                      dims_field("start_index_map", dims.start_index_map) +
                      "index_vector_dim = " + std::to_string(dims.index_vector_dim) +
                      ">, indices_are_sorted = false, slice_sizes = " + dims_attr(dims.slice_sizes);
  return op("gather", {operand, indices}, {operand.dtype(), result}, attrs);
}

Value Builder::scatter(const Value& operand, const Value& indices, const Value& updates, const ScatterDims& dims,
                       const ScatterCombiner& combiner) {
  std::string attrs = "indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<" +
                      dims_field("update_window_dims", dims.update_window_dims) +
                      dims_field("inserted_window_dims", dims.inserted_window_dims) +
                      dims_field("scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims) +
                      "index_vector_dim = " + std::to_string(dims.index_vector_dim) + ">, unique_indices = false";
  TensorType scalar{operand.dtype(), {}};
  return op_with_region("scatter", {operand, indices, updates}, {operand.type}, attrs, {scalar, scalar},
                        [&combiner](Builder& rb, const std::vector<Value>& args) {
                          return std::vector<Value>{combiner(rb, args[0], args[1])};
                        })[0];
}

Value Builder::gather_points(const Value& operand, const Value& coords) {
  Shape result(coords.shape().begin(), coords.shape().end() - 1);
  return gather(operand, coords, GatherDims::points(operand.rank(), static_cast<int64_t>(result.size())), result);
}

Value Builder::scatter_points(const Value& operand, const Value& coords, const Value& updates,
                              const ScatterCombiner& combiner) {
  ScatterDims s;
  s.inserted_window_dims = range(operand.rank());
  s.scatter_dims_to_operand_dims = range(operand.rank());
  s.index_vector_dim = updates.rank();
  return scatter(operand, coords, updates, s, combiner);
}

Value Builder::gather_slices(const Value& operand, int64_t dim, const Value& positions) {
  GatherDims g;
  g.offset_dims = all_dims_but(operand.rank(), dim);
  g.collapsed_slice_dims = {dim};
  g.start_index_map = {dim};
  g.index_vector_dim = 1;
  g.slice_sizes = operand.shape();
  g.slice_sizes[dim] = 1;
  Shape result = operand.shape();
  result[dim] = positions.shape()[0];
  return gather(operand, positions, g, result);
}

Value Builder::scatter_slices(const Value& operand, int64_t dim, const Value& positions, const Value& updates,
                              const ScatterCombiner& combiner) {
  ScatterDims s;
  s.update_window_dims = all_dims_but(operand.rank(), dim);
  s.inserted_window_dims = {dim};
  s.scatter_dims_to_operand_dims = {dim};
  s.index_vector_dim = 1;
  return scatter(operand, positions, updates, s, combiner);
}

Value overwrite(Builder&, const Value&, const Value& update) { return update; }

Value accumulate(Builder& b, const Value& current, const Value& update) { return b.binary("add", current, update); }

std::pair<Value, Value> Builder::rng_bit_generator(const Value& state, const TensorType& bits, RngAlgorithm algorithm) {
  static const char* names[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
  std::vector<Value> r =
      op_multi("rng_bit_generator", {state}, {state.type, bits},
               std::string("rng_algorithm = #stablehlo<rng_algorithm ") + names[static_cast<int>(algorithm)] + ">");
  return {r[0], r[1]};
}

std::vector<Value> Builder::sort(const std::vector<Value>& operands, int64_t dim, bool is_stable,
                                 const RegionBody& comparator) {
  std::vector<TensorType> results, block_args;
  for (const Value& v : operands) {
    results.push_back(v.type);
    block_args.insert(block_args.end(), 2, {v.dtype(), {}});
  }
  return op_with_region("sort", operands, results,
                        "dimension = " + std::to_string(dim) + " : i64, is_stable = " + (is_stable ? "true" : "false"),
                        block_args, comparator);
}

std::vector<Value> Builder::reduce_window(const std::vector<Value>& operands, const std::vector<Value>& inits,
                                          const Window& w, const RegionBody& body) {
  const Shape& in = operands.at(0).shape();
  const size_t rank = in.size();
  auto at = [](const std::vector<int64_t>& v, size_t d, int64_t fallback) { return v.empty() ? fallback : v[d]; };
  Shape shape;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t padded = in[d] + at(w.pad_lo, d, 0) + at(w.pad_hi, d, 0);
    const int64_t span = at(w.dilations, d, 1) * (w.dimensions[d] - 1) + 1;
    shape.push_back(padded < span ? 0 : (padded - span) / at(w.strides, d, 1) + 1);
  }
  std::vector<TensorType> results, block_args;
  for (const Value& v : operands) results.push_back({v.dtype(), shape});
  for (int twice = 0; twice < 2; ++twice) {
    for (const Value& v : operands) block_args.push_back({v.dtype(), {}});
  }
  std::vector<std::string> attrs;
  if (!w.pad_lo.empty() || !w.pad_hi.empty()) {
    attrs.push_back("padding = " + padding_attr(w.pad_lo.empty() ? std::vector<int64_t>(rank, 0) : w.pad_lo,
                                                w.pad_hi.empty() ? std::vector<int64_t>(rank, 0) : w.pad_hi));
  }
  if (!w.dilations.empty()) attrs.push_back("window_dilations = " + dims_attr(w.dilations));
  attrs.push_back("window_dimensions = " + dims_attr(w.dimensions));
  if (!w.strides.empty()) attrs.push_back("window_strides = " + dims_attr(w.strides));
  std::string text;
  for (size_t i = 0; i < attrs.size(); ++i) text += (i ? ", " : "") + attrs[i];
  std::vector<Value> all(operands);
  all.insert(all.end(), inits.begin(), inits.end());
  return op_with_region("reduce_window", all, results, text, block_args, body);
}

namespace {

// "[b, f, 0, 1]": the two named dims in the given order, then the spatial ones.
std::string conv_layout(const char* first, const char* second, size_t spatial) {
  std::string s = std::string("[") + first + ", " + second;
  for (size_t i = 0; i < spatial; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

}  // namespace

Value Builder::convolution(const Value& lhs, const Value& rhs, const ConvDims& d, const ConvWindow& w,
                           const TensorType& result, const std::string& precision) {
  const std::string dims =
      conv_layout(d.input_feature_first ? "f" : "b", d.input_feature_first ? "b" : "f", d.spatial) + "x" +
      conv_layout(d.kernel_input_first ? "i" : "o", d.kernel_input_first ? "o" : "i", d.spatial) + "->" +
      conv_layout(d.output_feature_first ? "f" : "b", d.output_feature_first ? "b" : "f", d.spatial);
  const std::string p = "#stablehlo<precision " + precision + ">";
  return op("convolution", {lhs, rhs}, result,
            "batch_group_count = " + std::to_string(w.batch_groups) + " : i64, dimension_numbers = #stablehlo.conv<" +
                dims + ">, feature_group_count = " + std::to_string(w.feature_groups) +
                " : i64, lhs_dilation = " + dims_attr(w.lhs_dilation) +
                ", padding = " + padding_attr(w.pad_lo, w.pad_hi) + ", precision_config = [" + p + ", " + p +
                "], rhs_dilation = " + dims_attr(w.rhs_dilation) + ", window_strides = " + dims_attr(w.strides));
}

Value Builder::fft(const Value& x, FftType type, const std::vector<int64_t>& fft_length, const TensorType& result) {
  static const char* names[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  return op("fft", {x}, result,
            std::string("fft_type = #stablehlo<fft_type ") + names[static_cast<int>(type)] +
                ">, fft_length = " + dims_attr(fft_length));
}

Value Builder::triangular_solve(const Value& a, const Value& b, bool left_side, bool lower, bool unit_diagonal,
                                bool transpose_a) {
  auto flag = [](bool v) { return v ? "true" : "false"; };
  return op("triangular_solve", {a, b}, b.type,
            std::string("left_side = ") + flag(left_side) + ", lower = " + flag(lower) +
                ", unit_diagonal = " + flag(unit_diagonal) + ", transpose_a = #stablehlo<transpose " +
                (!transpose_a            ? "NO_TRANSPOSE"
                 : is_complex(a.dtype()) ? "ADJOINT"
                                         : "TRANSPOSE") +
                ">");
}

Value Builder::unary(const std::string& name, const Value& v) {
  if (name == "abs" && is_complex(v.dtype()))
    return op(name, {v}, {complex_part_type(v.dtype()), v.shape()});  // |z| is real
  return op(name, {v}, v.type);
}

Value Builder::real(const Value& z) { return op("real", {z}, {complex_part_type(z.dtype()), z.shape()}); }

Value Builder::imag(const Value& z) { return op("imag", {z}, {complex_part_type(z.dtype()), z.shape()}); }

Value Builder::conjugate(const Value& z) {
  if (!is_complex(z.dtype())) return z;
  Value re = real(z);
  return complex(re, unary("negate", imag(z)));
}

Value Builder::complex(const Value& re, const Value& im) {
  return op("complex", {re, im}, {complex_type(re.dtype()), re.shape()});
}

Value Builder::binary(const std::string& name, const Value& a, const Value& b) { return op(name, {a, b}, a.type); }

Value Builder::compare(const Value& a, const Value& b, CompareDirection dir) {
  static const char* names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  std::string attrs =
      std::string("comparison_direction = #stablehlo<comparison_direction ") + names[static_cast<int>(dir)] + ">";
  if (is_float(a.dtype()))
    attrs += ", compare_type = #stablehlo<comparison_type FLOAT>";
  else if (is_unsigned(a.dtype()) || a.dtype() == ElementType::Pred)
    attrs += ", compare_type = #stablehlo<comparison_type UNSIGNED>";
  else if (is_integer(a.dtype()))
    attrs += ", compare_type = #stablehlo<comparison_type SIGNED>";
  return op("compare", {a, b}, {ElementType::Pred, a.shape()}, attrs);
}

Value Builder::select(const Value& pred, const Value& on_true, const Value& on_false) {
  return op("select", {pred, on_true, on_false}, on_true.type);
}

Value Builder::clamp(const Value& lo, const Value& v, const Value& hi) { return op("clamp", {lo, v, hi}, v.type); }

Value Builder::reduce(const Value& v, const Value& init, const std::vector<int64_t>& dims,
                      const std::string& combiner) {
  std::vector<bool> reduced(v.rank(), false);
  for (int64_t d : dims) reduced[d] = true;
  Shape kept;
  for (int64_t i = 0; i < v.rank(); ++i) {
    if (!reduced[i]) kept.push_back(v.shape()[i]);
  }
  // Runs of adjacent dims that are all reduced (or all kept) merge into one
  // dim (a free reshape of a row-major value): XLA:CPU emits a loop per
  // reduced dim, and summing a [B, T, C] gradient over (B, T) as one [B*T]
  // dim runs several times faster.
  Shape merged, merged_kept;
  std::vector<int64_t> merged_dims;
  for (int64_t i = 0; i < v.rank(); ++i) {
    const int64_t size = v.shape()[i];
    if (i > 0 && reduced[i] == reduced[i - 1]) {
      merged.back() *= size;
      if (!reduced[i]) merged_kept.back() *= size;
      continue;
    }
    if (reduced[i]) {
      merged_dims.push_back(static_cast<int64_t>(merged.size()));
    } else {
      merged_kept.push_back(size);
    }
    merged.push_back(size);
  }
  const Value input = merged.size() < static_cast<size_t>(v.rank()) ? reshape(v, merged) : v;
  Value r = reduce({input}, {init}, merged_dims, [&](Builder& b, const std::vector<Value>& args) {
    return std::vector<Value>{b.binary(combiner, args[0], args[1])};
  })[0];
  return merged_kept == kept ? r : reshape(r, kept);
}

std::vector<Value> Builder::reduce(const std::vector<Value>& operands, const std::vector<Value>& inits,
                                   const std::vector<int64_t>& dims, const RegionBody& body) {
  Shape kept;
  const Shape& in = operands.at(0).shape();
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(in[d]);
  }
  std::vector<TensorType> results, block_args;
  for (const Value& v : operands) results.push_back({v.dtype(), kept});
  for (int twice = 0; twice < 2; ++twice) {
    for (const Value& v : operands) block_args.push_back({v.dtype(), {}});
  }
  std::vector<Value> all(operands);
  all.insert(all.end(), inits.begin(), inits.end());
  return op_with_region("reduce", all, results, "dimensions = " + dims_attr(dims), block_args, body);
}

Value Builder::dot_general(const Value& a, const Value& b, const std::vector<int64_t>& batch_a,
                           const std::vector<int64_t>& batch_b, const std::vector<int64_t>& contract_a,
                           const std::vector<int64_t>& contract_b, const TensorType& result,
                           const std::string& precision) {
  std::string attrs =
      "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " + int_list(batch_a) +
      ", rhs_batching_dimensions = " + int_list(batch_b) + ", lhs_contracting_dimensions = " + int_list(contract_a) +
      ", rhs_contracting_dimensions = " + int_list(contract_b) + ">, precision_config = [#stablehlo<precision " +
      precision + ">, #stablehlo<precision " + precision + ">]";
  return op("dot_general", {a, b}, result, attrs);
}

void Builder::rollback(const Checkpoint& c) {
  blocks_.resize(1);
  indent_ = 2;
  params_.resize(c.params);
  blocks_.front().resize(c.text);
  next_ = c.next;
  foreign_.resize(c.foreign);
  functions_.resize(c.functions);
}

std::vector<Value> Builder::call_foreign(const std::string& module_text, const std::vector<Value>& operands) {
  ForeignModule module = parse_foreign_module(module_text);
  if (operands.size() != module.args.size()) {
    throw std::invalid_argument("foreign StableHLO module: its main takes " + std::to_string(module.args.size()) +
                                " arguments, called with " + std::to_string(operands.size()));
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!(operands[i].type == module.args[i])) {
      throw std::invalid_argument("foreign StableHLO module: its main's argument " + std::to_string(i) + " is " +
                                  module.args[i].str() + ", called with " + operands[i].type.str());
    }
  }
  size_t k = 0;
  while (k < foreign_.size() && foreign_[k] != module_text) ++k;
  const std::string prefix = "foreign" + std::to_string(k) + "_";
  if (k == foreign_.size()) {
    foreign_.push_back(module_text);
    functions_ += renamed_functions(module, prefix);
  }
  std::string id = fresh();
  const size_t n = module.results.size();
  std::string lhs = n == 1 ? id : id + ":" + std::to_string(n);
  emit(lhs + " = \"func.call\"(" + name_list(operands) + ") {callee = @" + prefix + "main} : (" + type_list(operands) +
       ") -> (" + type_list(module.results) + ")");
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) out.push_back({n == 1 ? id : id + "#" + std::to_string(i), module.results[i]});
  return out;
}

std::string Builder::finish(const std::vector<Value>& outputs) const {
  std::string text = "module @torch_tpu {\n  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    text += (i ? ", " : "") + std::string("%arg") + std::to_string(i) + ": " + params_[i].type.str();
    const Parameter& p = params_[i];
    if (!p.donated) continue;
    // An output of another type (a storage written through a view of
    // another dtype) cannot take the memory in place: left to XLA.
    const bool pinned = p.output >= 0 && static_cast<size_t>(p.output) < outputs.size() &&
                        outputs[static_cast<size_t>(p.output)].type == p.type;
    text += pinned ? " {tf.aliasing_output = " + std::to_string(p.output) + " : i32}" : " {jax.buffer_donor = true}";
  }
  text += ") -> (" + type_list(outputs) + ") {\n";
  text += blocks_.front();
  text += "    \"func.return\"(" + name_list(outputs) + ") : (" + type_list(outputs) + ") -> ()\n  }\n";
  text += functions_;
  text += "}\n";
  return text;
}

Value Builder::chlo(const std::string& name, const std::vector<Value>& operands, const TensorType& result) {
  std::string id = fresh();
  emit(id + " = \"chlo." + name + "\"(" + name_list(operands) + ") : (" + type_list(operands) + ") -> " + result.str());
  return {id, result};
}

std::vector<Value> Builder::while_loop(const std::vector<Value>& init, const RegionBody& cond, const RegionBody& body) {
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string id = fresh();
  auto region = [&](const RegionBody& fn) {
    std::vector<Value> args;
    std::string header = "^bb0(";
    for (size_t i = 0; i < types.size(); ++i) {
      Value a{fresh(), types[i]};
      header += (i ? ", " : "") + a.name + ": " + a.type.str();
      args.push_back(a);
    }
    blocks_.emplace_back();
    indent_ += 1;
    std::vector<Value> ret = fn(*this, args);
    emit("\"stablehlo.return\"(" + name_list(ret) + ") : (" + type_list(ret) + ") -> ()");
    indent_ -= 1;
    std::string text = blocks_.back();
    blocks_.pop_back();
    std::string pad(indent_ * 2, ' ');
    return "{\n" + pad + header + "):\n" + text + pad + "}";
  };
  std::string cond_region = region(cond);
  std::string body_region = region(body);
  std::string lhs = types.size() == 1 ? id : id + ":" + std::to_string(types.size());
  blocks_.back() += std::string(indent_ * 2, ' ') + lhs + " = \"stablehlo.while\"(" + name_list(init) + ") (" +
                    cond_region + ", " + body_region + ") : (" + type_list(init) + ") -> " + results_sig(types) + "\n";
  std::vector<Value> out;
  for (size_t i = 0; i < types.size(); ++i)
    out.push_back({types.size() == 1 ? id : id + "#" + std::to_string(i), types[i]});
  return out;
}

}  // namespace torch_tpu::hlo
