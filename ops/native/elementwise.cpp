// Native elementwise ops: dtype promotion, broadcasting, allocation, then the kernel.
#include <cmath>

#include "ops/native/factory.h"
#include "ops/native/native.h"

namespace mdl::native {

namespace {
void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  MDL_CHECK(a.defined() && b.defined(), op, ": undefined tensor");
  MDL_CHECK(a.device() == b.device() || a.dim() == 0 || b.dim() == 0, op, ": tensors on different devices, ",
            a.device(), " and ", b.device());
}

bool allows_integral(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Square || op == UnaryOp::Sign ||
         op == UnaryOp::Relu;
}

// A channels-last operand of the result's shape makes a channels-last result (the first one's
// format wins), so a channels-last network stays channels-last through its elementwise ops.
MemoryFormat result_format(const Tensor& a, const Tensor& b, const Shape& shape) {
  for (const Tensor* t : {&a, &b})
    if (t->shape() == shape && t->memory_format() == MemoryFormat::ChannelsLast) return MemoryFormat::ChannelsLast;
  return MemoryFormat::Contiguous;
}
bool is_cpu_scalar(const Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }
// The device an op runs on: a dimensioned operand's; of two 0-d operands, a's unless a is on the
// CPU (a 0-d CPU tensor is a scalar, as in PyTorch).
Device op_device(const Tensor& a, const Tensor& b) {
  return a.dim() == 0 && (b.dim() != 0 || a.device().is_cpu()) ? b.device() : a.device();
}
DType scalar_dtype(double value, const Tensor& like) {
  const DType t = like.dtype();
  if (is_floating(t)) return t;
  const bool whole = std::floor(value) == value && std::isfinite(value);
  return whole ? (t == kBool ? kI64 : t) : kF32;
}
// A whole number in integer dtype t, wrapped modulo the dtype's range as PyTorch converts a Python
// int (u8 + -1 adds 255, which wraps to x - 1), where a plain conversion would clamp it (to 0).
// Past i64's range there is no such integer: an mdl::Error.
double scalar_value(double value, DType t) {
  if (is_floating(t)) return value;
  MDL_CHECK(value >= -9223372036854775808.0 && value < 9223372036854775808.0, "the number ", value,
            " is past the range of a 64-bit integer; make the tensor floating first");
  const auto v = int64_t(value);
  return t == kU8 ? double(uint8_t(v)) : t == kI32 ? double(int32_t(v)) : double(v);
}
// The values an integer dtype holds: [lo, hi]; u8 [0, 255], i32 and i64 their two's complement ranges.
void integer_range(DType t, double& lo, double& hi) {
  if (t == kU8) lo = 0, hi = 255;
  else if (t == kI32) lo = -2147483648.0, hi = 2147483647.0;
  else lo = -9223372036854775808.0, hi = 9223372036854775807.0;
}
}  // namespace

double integer_value(double value, DType t, const char* op) {
  if (t == kBool) return value != 0 ? 1.0 : 0.0;
  if (is_floating(t)) return value;
  MDL_CHECK(std::isfinite(value), op, ": ", value, " cannot be converted to ", t);
  const double whole = std::trunc(value);
  double lo, hi;
  integer_range(t, lo, hi);
  // Below lo as far as the signed type of t's width reaches, a value wraps (-1 into u8 is 255).
  const double wrap_lo = t == kU8 ? -128.0 : lo;
  const double wrap_hi = t == kI32 ? 4294967295.0 : hi;
  MDL_CHECK(whole >= wrap_lo && whole <= wrap_hi, op, ": ", value, " cannot be converted to ", t, " without overflow");
  return scalar_value(whole, t);
}

DType result_type(const Tensor& a, const Tensor& b) {
  bool sa = a.dim() == 0, sb = b.dim() == 0;
  if (sa != sb && is_floating(a.dtype()) == is_floating(b.dtype()) && a.dtype() != kBool && b.dtype() != kBool)
    return sa ? b.dtype() : a.dtype();
  return promote_types(a.dtype(), b.dtype());
}

bool is_scalar_operand(const Tensor& s, const Tensor& other) { return is_cpu_scalar(s) && !is_cpu_scalar(other); }

Tensor unary(UnaryOp op, const Tensor& x) {
  MDL_CHECK(x.defined(), unary_op_name(op), ": undefined tensor");
  Tensor in = x;
  if (!is_floating(x.dtype()) && !allows_integral(op)) in = to_dtype(x, kF32);  // exp of an int is a float
  MDL_CHECK(!(x.dtype() == kBool && op == UnaryOp::Neg), "neg: not defined for bool tensors (use logical not)");
  Tensor out = make_tensor(in.shape(), in.dtype(), in.device(), in.memory_format());
  if (out.numel()) kernels::unary(in.device(), op, out, in);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_same_device(a, b, name);
  DType compute = result_type(a, b);
  if (op == BinaryOp::Div && !is_floating(compute)) compute = kF32;  // true division, as torch.div
  if (compute == kBool && (op == BinaryOp::Sub || op == BinaryOp::Div || op == BinaryOp::Pow))
    MDL_FAIL(name, ": not defined for bool tensors");
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Device dev = op_device(a, b);
  Tensor out = make_tensor(shape, is_comparison(op) ? kBool : compute, dev, result_format(a, b, shape));
  if (out.numel() == 0) return out;
  auto as_compute = [&](const Tensor& t) { return t.dtype() == compute ? t : to_dtype(t, compute); };
  const bool scalar_left = is_scalar_operand(a, b);
  if (scalar_left || is_scalar_operand(b, a)) {  // the other operand is on dev and has out's shape
    kernels::binary_scalar(dev, op, out, as_compute(scalar_left ? b : a), as_compute(scalar_left ? a : b), scalar_left);
    return out;
  }
  const bool mixed = kernels::binary_takes_mixed(dev, op, compute, a.dtype(), b.dtype());
  Tensor ca = expand(to_device(mixed ? a : as_compute(a), dev), shape);
  Tensor cb = expand(to_device(mixed ? b : as_compute(b), dev), shape);
  kernels::binary(dev, op, out, ca, cb);
  return out;
}

Tensor scalar_like(double value, const Tensor& like) {
  const DType t = scalar_dtype(value, like);
  return full({}, scalar_value(value, t), {t, like.device()});
}

Tensor scalar_operand(double value, const Tensor& like) {
  const DType t = scalar_dtype(value, like);
  return full({}, scalar_value(value, t), {t, Device::cpu()});
}

Tensor division_operand(double value, const Tensor& like) {
  return is_floating(like.dtype()) ? scalar_operand(value, like) : full({}, value, {kF32, Device::cpu()});
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  MDL_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  if (is_integral(x.dtype()) && x.dtype() != kBool) {  // a whole bound past the dtype's range never wraps
    double min, max;
    integer_range(x.dtype(), min, max);
    auto whole = [](const std::optional<double>& b) { return b && std::isfinite(*b) && std::floor(*b) == *b; };
    MDL_CHECK(!whole(lo) || *lo <= max, "clamp: min ", *lo, " is above every ", x.dtype(), " value");
    MDL_CHECK(!whole(hi) || *hi >= min, "clamp: max ", *hi, " is below every ", x.dtype(), " value");
    if (whole(lo) && *lo < min) lo.reset();  // no element lies below it
    if (whole(hi) && *hi > max) hi.reset();
    if (!lo && !hi) return clone(x);
  }
  Tensor r = x;
  if (lo) r = binary(BinaryOp::Maximum, r, scalar_operand(*lo, x));
  if (hi) r = binary(BinaryOp::Minimum, r, scalar_operand(*hi, x));
  return r;
}

}  // namespace mdl::native
