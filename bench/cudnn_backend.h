// The few pieces of cuDNN's backend graph API that bench/cudnn_sdpa.cpp builds its graphs from: a
// checked call that names its step, a descriptor owned by its holder, and a graph that keeps every
// descriptor it made (tensors, matmuls, pointwise ops, reductions, reshapes) alive for its plan.
// Included by bench/cudnn_sdpa.cpp only (it pulls in cuDNN's headers).
#pragma once
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench::cudnn {

// Virtual tensors' unique ids start here; the ids below are the caller's, for the variant pack.
constexpr int64_t kFirstVirtual = 100;

// A backend call that failed, named by the step it served.
struct StepFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string cudnn_version() {
  const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch from 9.0 on
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

inline void check(cudnnStatus_t s, const std::string& step, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char last[512] = "";
  cudnnGetLastErrorString(last, sizeof last);
  throw StepFailed(step + ": " + call + " failed: " + cudnnGetErrorString(s) +
                   (last[0] ? std::string(" (") + last + ")" : std::string()));
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, const std::string& step) : step_(step) {
    check(cudnnBackendCreateDescriptor(type, &d_), step_, "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T& value) {
    return set_n(name, type, 1, &value);
  }
  template <class T>
  Desc& set_n(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const T* values) {
    check(cudnnBackendSetAttribute(d_, name, type, n, values), step_, "cudnnBackendSetAttribute");
    return *this;
  }
  cudnnBackendDescriptor_t finalize() {
    check(cudnnBackendFinalize(d_), step_, "cudnnBackendFinalize");
    return d_;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string step_;
};

using Dims = std::array<int64_t, 4>;

inline Dims contiguous(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// The graph's descriptors, kept alive as long as the plan built from them.
struct Graph {
  std::vector<std::unique_ptr<Desc>> owned;
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t next_uid = kFirstVirtual;

  Desc& make(cudnnBackendDescriptorType_t type, const std::string& step) {
    owned.push_back(std::make_unique<Desc>(type, step));
    return *owned.back();
  }
  // by_value: a host scalar in the variant pack; f16x16: the reordering cuDNN's attention backward
  // asks of its f32 dQ accumulator.
  cudnnBackendDescriptor_t tensor(const std::string& name, cudnnDataType_t t, const Dims& dims, const Dims& strides,
                                  int64_t uid, bool by_value = false, bool f16x16 = false) {
    const bool is_virtual = uid >= kFirstVirtual;
    const int64_t alignment = 16;
    Desc& d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, t)
        .set_n(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data())
        .set_n(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data())
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual);
    if (by_value) d.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
    if (f16x16)
      d.set(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, CUDNN_TENSOR_REORDERING_F16x16);
    return d.finalize();
  }
  cudnnBackendDescriptor_t virtual_tensor(const std::string& name, cudnnDataType_t t, const Dims& dims) {
    return tensor(name, t, dims, contiguous(dims), next_uid++);
  }
  cudnnBackendDescriptor_t virtual_tensor(const std::string& name, cudnnDataType_t t, const Dims& dims,
                                          const Dims& strides) {
    return tensor(name, t, dims, strides, next_uid++);
  }
  // y: x's elements under other dims and strides (a transposed view).
  void reshape(const std::string& name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x)
        .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y);
    ops.push_back(op.finalize());
  }
  void matmul(const std::string& name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c) {
    Desc& mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name);
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT).finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, mm.get());
    ops.push_back(op.finalize());
  }
  // y = mode(x[, b][, t]); axis only for GEN_INDEX.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t precision,
                 cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                 cudnnBackendDescriptor_t y, int64_t axis = -1) {
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, precision);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
    pw.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, name);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, pw.get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x);
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b);
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y);
    ops.push_back(op.finalize());
  }
  // A new virtual f32 tensor of `dims`, mode(x[, b]) computed in f32: most steps of the graphs.
  cudnnBackendDescriptor_t f32_pointwise(const std::string& name, cudnnPointwiseMode_t mode, const Dims& dims,
                                         cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b = nullptr) {
    cudnnBackendDescriptor_t y = virtual_tensor(name, CUDNN_DATA_FLOAT, dims);
    pointwise(name, mode, CUDNN_DATA_FLOAT, x, b, nullptr, y);
    return y;
  }
  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    Desc& r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name);
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT)
        .finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, name);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, r.get());
    ops.push_back(op.finalize());
  }
};

}  // namespace bench::cudnn
