// 2-D convolution through cuDNN, forward beside backward (data, filter; the bias gradient by our
// own deterministic reduction). Each (direction, dtype, shapes, params, TF32 and determinism
// settings, choice mode) gets a Plan once: its cuDNN descriptors and its algorithm, so every later
// call is a map lookup and a launch. The algorithm is measured with cudnnFind*AlgorithmEx (as
// cudnn.benchmark does), keeping the fastest deterministic one (any, with
// toggles::cudnn_nondeterministic()), while toggles::cudnn_benchmark() is on (the default); taken
// from the v7 heuristics when it is off, and while a CUDA Graph is being captured (that choice is
// not kept: the next eager call measures). Workspaces come from the caching allocator.
// f32 (TF32 only when toggles::cudnn_allow_tf32()), f64, and f16/bf16 with f32 compute. A channels-last
// output (or input or weight, in the backward) runs every operand in NHWC, so f16/bf16 convs reach
// the tensor-core kernels without layout transforms; operands in the other format are copied.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cuda/kernels.cuh"
#include "cuda/common.cuh"
#include "cuda/api.h"
#include "kernels/views.h"
#include "switches/list/toggles.h"

namespace mdl::cuda {

using namespace detail;

namespace {

enum class Dir : int { Forward, BackwardData, BackwardFilter };

// ---- descriptors ------------------------------------------------------------------------------

// Dims are always given as (N, C, H, W); the format says how they lie in memory.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(const char* op, cudnnDataType_t t, cudnnTensorFormat_t f, const std::array<int, 4>& s) {
    CUDNN_CHECK(op, cudnnCreateTensorDescriptor(&d));
    CUDNN_CHECK(op, cudnnSetTensor4dDescriptor(d, f, t, s[0], s[1], s[2], s[3]));
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(const char* op, cudnnDataType_t t, cudnnTensorFormat_t f, const std::array<int, 4>& s) {
    CUDNN_CHECK(op, cudnnCreateFilterDescriptor(&d));
    CUDNN_CHECK(op, cudnnSetFilter4dDescriptor(d, t, f, s[0], s[1], s[2], s[3]));
  }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const char* op, const kernels::Conv2dParams& p, cudnnDataType_t compute, cudnnMathType_t math) {
    CUDNN_CHECK(op, cudnnCreateConvolutionDescriptor(&d));
    CUDNN_CHECK(op, cudnnSetConvolution2dDescriptor(d, int(p.pad_h), int(p.pad_w), int(p.stride_h), int(p.stride_w),
                                                    int(p.dil_h), int(p.dil_w), CUDNN_CROSS_CORRELATION, compute));
    CUDNN_CHECK(op, cudnnSetConvolutionGroupCount(d, int(p.groups)));
    CUDNN_CHECK(op, cudnnSetConvolutionMathType(d, math));
  }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// Storage type, compute type and default math of one mdl dtype.
struct Types {
  cudnnDataType_t data, compute;
  cudnnMathType_t math;
};
Types types_for(const char* op, DType t) {
  switch (t) {
    case kF32:
      return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, toggles::cudnn_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH};
    case kF64: return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH};
    case kF16: return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    case kBF16: return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    default: MDL_FAIL(op, ": expected an f32, f64, f16 or bf16 tensor on CUDA, got ", dtype_name(t));
  }
}

std::array<int, 4> dims4(const char* op, const Tensor& t) {
  MDL_CHECK(t.numel() <= INT_MAX, op, ": a tensor of shape ", shape_str(t.shape()), " holds ", t.numel(),
            " elements, more than the 2^31 - 1 cuDNN's 4-d descriptors take (split the batch)");
  std::array<int, 4> d;
  for (int i = 0; i < 4; ++i) {
    MDL_CHECK(t.size(i) <= INT_MAX, op, ": shape ", shape_str(t.shape()), " exceeds cuDNN's int range");
    d[size_t(i)] = int(t.size(i));
  }
  return d;
}

// Everything a plan depends on.
struct Key {
  int dir;
  DType dtype;
  bool tf32, measured, nondeterministic, nhwc;
  std::array<int, 4> x, w;
  std::array<int64_t, 7> p;
  auto tie() const { return std::tie(dir, dtype, tf32, measured, nondeterministic, nhwc, x, w, p); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Choice {
  int algo;              // the cudnnConvolution*Algo_t
  cudnnMathType_t math;  // set on the descriptor before running it
  size_t workspace;      // bytes
};

// The largest workspace an algorithm may use while being benchmarked.
size_t find_workspace_limit() {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK("conv2d", cudaMemGetInfo(&free_b, &total_b));
  return std::min<size_t>(size_t(256) << 20, free_b / 2);
}

// A device buffer of `bytes` from the caching allocator (undefined for 0).
Tensor workspace(size_t bytes) {
  if (bytes == 0) return Tensor();
  return make_tensor({int64_t(bytes)}, kU8, Device::cuda(0));
}
void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// MDL_CUDNN_LOG set in the environment: every algorithm list a new plan chooses from goes to
// stderr, measured (with cuDNN's times) or from the heuristic, so a choice can be checked.
template <class Perf>
void log_choices(const char* op, const Perf* perf, int n) {
  static const bool on = std::getenv("MDL_CUDNN_LOG") != nullptr;
  if (!on) return;
  std::fprintf(stderr, "cudnn %s: %d algorithms (algo status deterministic ms MiB math)", op, n);
  for (int i = 0; i < n; ++i)
    std::fprintf(stderr, " | %d %d %d %.3f %.1f %d", int(perf[i].algo), int(perf[i].status), int(perf[i].determinism),
                 double(perf[i].time), double(perf[i].memory) / (1 << 20), int(perf[i].mathType));
  std::fprintf(stderr, "\n");
}

// The algorithms cuDNN's documentation says sum with atomics, whose results vary from run to run:
// never taken as deterministic, whatever a perf record's determinism field says.
bool sums_with_atomics(cudnnConvolutionFwdAlgo_t) { return false; }
bool sums_with_atomics(cudnnConvolutionBwdDataAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
bool sums_with_atomics(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// The first successful result of a sorted perf list (cuDNN sorts by time) that is deterministic,
// or any while toggles::cudnn_nondeterministic() is on.
template <class Perf>
Choice pick(const char* op, const Perf* perf, int n) {
  log_choices(op, perf, n);
  const bool any = toggles::cudnn_nondeterministic();
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS &&
        (any || (perf[i].determinism == CUDNN_DETERMINISTIC && !sums_with_atomics(perf[i].algo))))
      return {int(perf[i].algo), perf[i].mathType, perf[i].memory};
  for (int i = 0; i < n; ++i)  // none deterministic: the fastest that works
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return {int(perf[i].algo), perf[i].mathType, perf[i].memory};
  MDL_FAIL(op, ": cuDNN found no algorithm for this convolution");
}

// One convolution's cuDNN state, made on its first call and reused: the descriptors of its
// operands and the algorithm chosen for it (with the descriptor's math type set to match).
struct Plan {
  Types ty;
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  std::optional<Choice> choice;  // read and written under g_plans_mutex

  Plan(const char* op, DType dt, cudnnTensorFormat_t f, const std::array<int, 4>& xd, const std::array<int, 4>& wd,
       const std::array<int, 4>& yd, const kernels::Conv2dParams& p)
      : ty(types_for(op, dt)), x(op, ty.data, f, xd), y(op, ty.data, f, yd), w(op, ty.data, f, wd),
        conv(op, p, ty.compute, ty.math) {}
};

std::mutex g_plans_mutex;
std::map<Key, std::unique_ptr<Plan>> g_plans;  // a plan's address is stable while the map lives

// The operands of one convolution call and the plan for them.
struct Problem {
  const char* op;
  bool measured;
  Plan* plan;

  // Every operand lies in one format: channels-last (NHWC) when nhwc, else NCHW.
  Problem(const char* op_, Dir dir, DType dt, bool nhwc, const Tensor& xt, const Tensor& wt, const Tensor& yt,
          const kernels::Conv2dParams& p)
      : op(op_), measured(toggles::cudnn_benchmark()) {
    const Key key{int(dir),
                  dt,
                  toggles::cudnn_allow_tf32(),
                  measured,
                  toggles::cudnn_nondeterministic(),
                  nhwc,
                  dims4(op_, xt),
                  dims4(op_, wt),
                  {p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w, p.groups}};
    std::lock_guard<std::mutex> lock(g_plans_mutex);
    auto& slot = g_plans[key];
    if (!slot)
      slot = std::make_unique<Plan>(op_, dt, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, key.x, key.w, dims4(op_, yt),
                                    p);
    plan = slot.get();
  }
  cudnnTensorDescriptor_t x() const { return plan->x.d; }
  cudnnTensorDescriptor_t y() const { return plan->y.d; }
  cudnnFilterDescriptor_t w() const { return plan->w.d; }
  cudnnConvolutionDescriptor_t conv() const { return plan->conv.d; }

  // The plan's algorithm, chosen on first use by `find` (measured) or `heuristic` (the switch off,
  // or under capture, where the choice is not kept), with the descriptor's math type set for it:
  // f32 without TF32 stays on FMA math whatever the search used.
  template <class Find, class Heuristic>
  Choice choose(Find&& find, Heuristic&& heuristic) {
    {
      std::lock_guard<std::mutex> lock(g_plans_mutex);
      if (plan->choice) return *plan->choice;
    }
    const bool keep = !measured || !capturing();
    const Choice c = measured && keep ? find() : heuristic();
    CUDNN_CHECK(op,
                cudnnSetConvolutionMathType(plan->conv.d, plan->ty.math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : c.math));
    if (keep) {
      std::lock_guard<std::mutex> lock(g_plans_mutex);
      plan->choice = c;
    }
    return c;
  }
};

// alpha = 1, beta = 0 in the scaling type cuDNN expects: double for f64 data, float otherwise.
struct Scaling {
  float f1 = 1.f, f0 = 0.f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Scaling(DType t) : dbl(t == kF64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};

constexpr int kMaxAlgos = 16;

void conv_forward(Problem& P, const Tensor& out, const Tensor& x, const Tensor& w) {
  const char* op = P.op;
  const Choice c = P.choose(
      [&] {
        Tensor ws = workspace(find_workspace_limit());
        cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
        int n = 0;
        CUDNN_CHECK(op, cudnnFindConvolutionForwardAlgorithmEx(cudnn(), P.x(), x.raw_data(), P.w(), w.raw_data(),
                                                               P.conv(), P.y(), out.raw_data(), kMaxAlgos, &n, perf,
                                                               data_or_null(ws), size_t(ws.numel())));
        return pick(op, perf, n);
      },
      [&] {
        cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
        int n = 0;
        CUDNN_CHECK(
            op, cudnnGetConvolutionForwardAlgorithm_v7(cudnn(), P.x(), P.w(), P.conv(), P.y(), kMaxAlgos, &n, perf));
        return pick(op, perf, n);
      });
  Tensor ws = workspace(c.workspace);
  const Scaling s(out.dtype());
  CUDNN_CHECK(op, cudnnConvolutionForward(cudnn(), s.one(), P.x(), x.raw_data(), P.w(), w.raw_data(), P.conv(),
                                          cudnnConvolutionFwdAlgo_t(c.algo), data_or_null(ws), c.workspace, s.zero(),
                                          P.y(), out.raw_data()));
}

void conv_backward_data(Problem& P, const Tensor& gx, const Tensor& gy, const Tensor& w) {
  const char* op = P.op;
  const Choice c = P.choose(
      [&] {
        Tensor ws = workspace(find_workspace_limit());
        cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
        int n = 0;
        CUDNN_CHECK(op, cudnnFindConvolutionBackwardDataAlgorithmEx(cudnn(), P.w(), w.raw_data(), P.y(), gy.raw_data(),
                                                                    P.conv(), P.x(), gx.raw_data(), kMaxAlgos, &n, perf,
                                                                    data_or_null(ws), size_t(ws.numel())));
        return pick(op, perf, n);
      },
      [&] {
        cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
        int n = 0;
        CUDNN_CHECK(op, cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn(), P.w(), P.y(), P.conv(), P.x(), kMaxAlgos,
                                                                    &n, perf));
        return pick(op, perf, n);
      });
  Tensor ws = workspace(c.workspace);
  const Scaling s(gx.dtype());
  CUDNN_CHECK(op, cudnnConvolutionBackwardData(cudnn(), s.one(), P.w(), w.raw_data(), P.y(), gy.raw_data(), P.conv(),
                                               cudnnConvolutionBwdDataAlgo_t(c.algo), data_or_null(ws), c.workspace,
                                               s.zero(), P.x(), gx.raw_data()));
}

void conv_backward_filter(Problem& P, const Tensor& gw, const Tensor& gy, const Tensor& x) {
  const char* op = P.op;
  const Choice c = P.choose(
      [&] {
        Tensor ws = workspace(find_workspace_limit());
        cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
        int n = 0;
        CUDNN_CHECK(op, cudnnFindConvolutionBackwardFilterAlgorithmEx(
                            cudnn(), P.x(), x.raw_data(), P.y(), gy.raw_data(), P.conv(), P.w(), gw.raw_data(),
                            kMaxAlgos, &n, perf, data_or_null(ws), size_t(ws.numel())));
        return pick(op, perf, n);
      },
      [&] {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
        int n = 0;
        CUDNN_CHECK(op, cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn(), P.x(), P.y(), P.conv(), P.w(), kMaxAlgos,
                                                                      &n, perf));
        return pick(op, perf, n);
      });
  Tensor ws = workspace(c.workspace);
  const Scaling s(gw.dtype());
  CUDNN_CHECK(op, cudnnConvolutionBackwardFilter(cudnn(), s.one(), P.x(), x.raw_data(), P.y(), gy.raw_data(), P.conv(),
                                                 cudnnConvolutionBwdFilterAlgo_t(c.algo), data_or_null(ws), c.workspace,
                                                 s.zero(), P.w(), gw.raw_data()));
}

// out (N, Cout, Ho, Wo) += b[c], broadcast over (N, Ho, Wo); HW = Ho * Wo for NCHW, 1 for NHWC
// (the channel is then the fastest index).
template <class T>
__global__ void add_bias_kernel(T* out, const T* b, int64_t n, int64_t C, int64_t HW) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = convert<T>(to_acc(out[i]) + to_acc(b[(i / HW) % C]));
}

}  // namespace

namespace {
MemoryFormat format_for(bool nhwc) { return nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous; }

// t when it lies in format f, else a tensor of its shape in f for cuDNN to write (copied back after).
Tensor target_in(const Tensor& t, MemoryFormat f) {
  return !t.defined() || t.is_contiguous(f) ? t : make_tensor(t.shape(), t.dtype(), t.device(), f);
}
}  // namespace

void conv2d_forward(const Tensor& out_in, const Tensor& x_in, const Tensor& w_in, const Tensor& b,
                    const kernels::Conv2dParams& p) {
  const char* op = "conv2d";
  if (out_in.numel() == 0) return;
  // The caller lays out the output in the conv's format: NHWC runs cuDNN's channels-last kernels.
  const bool nhwc = out_in.memory_format() == MemoryFormat::ChannelsLast;
  const MemoryFormat f = format_for(nhwc);
  const Tensor x = kernels::contiguous(x_in, f), w = kernels::contiguous(w_in, f), out = target_in(out_in, f);
  if (x.numel() > 0) {
    Problem P(op, Dir::Forward, out.dtype(), nhwc, x, w, out, p);
    conv_forward(P, out, x, w);
  } else {  // an empty input plane under padding: the bias alone
    cuda::fill(out, 0.0);
  }
  if (b.defined()) {
    const Tensor bc = kernels::contiguous(b);
    const int64_t n = out.numel(), C = out.size(1), HW = nhwc ? 1 : out.size(2) * out.size(3);
    dispatch_floating<DeviceTypes>(out.dtype(), op, [&]<class T>() {
      add_bias_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<const T>(bc), n, C, HW);
      CUDA_CHECK_LAUNCH(op);
    });
  }
  kernels::copy_from_target(out_in, out);
}

void conv2d_backward(const Tensor& grad_x_in, const Tensor& grad_w_in, const Tensor& grad_b, const Tensor& grad_out,
                     const Tensor& x_in, const Tensor& w_in, const kernels::Conv2dParams& p) {
  const char* op = "conv2d_backward";
  const auto channels_last = [](const Tensor& t) {
    return t.defined() && t.memory_format() == MemoryFormat::ChannelsLast;
  };
  const bool nhwc = channels_last(grad_x_in) || channels_last(grad_out) || channels_last(x_in) || channels_last(w_in);
  const MemoryFormat f = format_for(nhwc);
  const Tensor gy = kernels::contiguous(grad_out, f);
  const bool empty = gy.numel() == 0 || x_in.numel() == 0 || w_in.numel() == 0;
  if (grad_b.defined()) {
    if (gy.numel() == 0) {
      cuda::fill(grad_b, 0.0);
    } else if (nhwc) {  // gy is (N*Ho*Wo, C) rows in memory
      const int64_t C = gy.size(1), rows = gy.numel() / C;
      cuda::reduce(ReduceOp::Sum, kernels::view_contiguous(grad_b, {1, C}),
                   make_view(gy, {rows, C}, {C, 1}, gy.offset()), {true, false});
    } else {
      cuda::reduce(ReduceOp::Sum, kernels::view_contiguous(grad_b, {1, grad_b.size(0), 1, 1}), gy,
                   {true, false, true, true});
    }
  }
  if (empty) {  // nothing flows: every wanted gradient is zero
    if (grad_x_in.defined() && grad_x_in.numel()) cuda::fill(grad_x_in, 0.0);
    if (grad_w_in.defined() && grad_w_in.numel()) cuda::fill(grad_w_in, 0.0);
    return;
  }
  const Tensor x = kernels::contiguous(x_in, f), w = kernels::contiguous(w_in, f);
  if (grad_x_in.defined()) {
    const Tensor grad_x = target_in(grad_x_in, f);
    Problem P(op, Dir::BackwardData, x.dtype(), nhwc, x, w, gy, p);
    conv_backward_data(P, grad_x, gy, w);
    kernels::copy_from_target(grad_x_in, grad_x);
  }
  if (grad_w_in.defined()) {
    const Tensor grad_w = target_in(grad_w_in, f);
    Problem P(op, Dir::BackwardFilter, x.dtype(), nhwc, x, w, gy, p);
    conv_backward_filter(P, grad_w, gy, x);
    kernels::copy_from_target(grad_w_in, grad_w);
  }
}

}  // namespace mdl::cuda
