// cuDNN's fused flash attention forward (bench/cudnn_sdpa.h) as one operation graph of the backend
// API, in the pattern cuDNN 9 documents for its fused flash-attention forward:
//   S = Q K^T (matmul; K^T is K's memory with the last two dims and strides swapped)
//   S = S * scale (pointwise, the scale passed by value)
//   causal: S = row >= col ? S : lowest float (GEN_INDEX on both axes, CMP_GE, BINARY_SELECT)
//   m = max(S), E = exp(S - m), z = sum(E) (row reductions and pointwise), stats = m + log(z)
//   P = E / z in the inputs' dtype (the second matmul's A operand must be), O = P V (matmul)
// Every intermediate is virtual and f32 but P. Each backend call is checked: a failure names the
// step, cuDNN's status and message and version, and becomes the reason the shape is unsupported.
#include "bench/cudnn_sdpa.h"

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/runtime/context.cuh"
#include "mdl.h"

namespace bench {
namespace {

using mdl::Tensor;

// A backend call that failed while the graph or its plan was being built.
struct StepFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string cudnn_version() {
  const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch from 9.0 on
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

void check(cudnnStatus_t s, const std::string& step, const char* call) {
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

Dims contiguous(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// The unique ids of the tensors the variant pack binds; virtual tensors number from kFirstVirtual.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kLowest, kFirstVirtual = 100 };

// The graph's descriptors, kept alive as long as the plan built from them.
struct Graph {
  std::vector<std::unique_ptr<Desc>> owned;
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t next_uid = kFirstVirtual;

  Desc& make(cudnnBackendDescriptorType_t type, const std::string& step) {
    owned.push_back(std::make_unique<Desc>(type, step));
    return *owned.back();
  }
  cudnnBackendDescriptor_t tensor(const std::string& name, cudnnDataType_t t, const Dims& dims, const Dims& strides,
                                  int64_t uid, bool by_value = false) {
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
    return d.finalize();
  }
  cudnnBackendDescriptor_t virtual_tensor(const std::string& name, cudnnDataType_t t, const Dims& dims) {
    return tensor(name, t, dims, contiguous(dims), next_uid++);
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

struct Shape {
  int64_t b, h, l, s, d;
  mdl::DType dtype;
  bool causal;
  auto key() const { return std::tuple(b, h, l, s, d, int(dtype), causal); }
};

// Q (B, H, L, D), K and V (B, H, S, D), O like Q, stats (B, H, L, 1).
void build_graph(Graph& g, const Shape& sh) {
  const cudnnDataType_t io = sh.dtype == mdl::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const Dims q_dims{sh.b, sh.h, sh.l, sh.d}, kv_dims{sh.b, sh.h, sh.s, sh.d};
  const Dims kt_dims{sh.b, sh.h, sh.d, sh.s}, kt_strides{sh.h * sh.s * sh.d, sh.s * sh.d, 1, sh.d};
  const Dims scores{sh.b, sh.h, sh.l, sh.s}, rows{sh.b, sh.h, sh.l, 1}, one{1, 1, 1, 1};
  auto q = g.tensor("Q", io, q_dims, contiguous(q_dims), kQ);
  auto kt = g.tensor("K^T", io, kt_dims, kt_strides, kK);
  auto v = g.tensor("V", io, kv_dims, contiguous(kv_dims), kV);
  auto o = g.tensor("O", io, q_dims, contiguous(q_dims), kO);
  auto stats = g.tensor("stats", CUDNN_DATA_FLOAT, rows, contiguous(rows), kStats);
  auto scale = g.tensor("scale", CUDNN_DATA_FLOAT, one, one, kScale, true);

  auto s = g.virtual_tensor("S", CUDNN_DATA_FLOAT, scores);
  g.matmul("Q K^T", q, kt, s);
  auto scaled = g.virtual_tensor("S * scale", CUDNN_DATA_FLOAT, scores);
  g.pointwise("scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s, scale, nullptr, scaled);
  s = scaled;
  if (sh.causal) {
    auto row = g.virtual_tensor("row index", CUDNN_DATA_INT32, scores);
    g.pointwise("row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, nullptr, row, 2);
    auto col = g.virtual_tensor("col index", CUDNN_DATA_INT32, scores);
    g.pointwise("col index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, nullptr, col, 3);
    auto keep = g.virtual_tensor("row >= col", CUDNN_DATA_BOOLEAN, scores);
    g.pointwise("row >= col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    auto lowest = g.tensor("lowest", CUDNN_DATA_FLOAT, one, one, kLowest, true);
    auto masked = g.virtual_tensor("masked S", CUDNN_DATA_FLOAT, scores);
    g.pointwise("causal select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, lowest, keep, masked);
    s = masked;
  }
  auto m = g.virtual_tensor("row max", CUDNN_DATA_FLOAT, rows);
  g.reduction("row max", CUDNN_REDUCE_TENSOR_MAX, s, m);
  auto centred = g.virtual_tensor("S - max", CUDNN_DATA_FLOAT, scores);
  g.pointwise("S - max", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s, m, nullptr, centred);
  auto e = g.virtual_tensor("exp", CUDNN_DATA_FLOAT, scores);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, centred, nullptr, nullptr, e);
  auto z = g.virtual_tensor("row sum", CUDNN_DATA_FLOAT, rows);
  g.reduction("row sum", CUDNN_REDUCE_TENSOR_ADD, e, z);
  auto log_z = g.virtual_tensor("log sum", CUDNN_DATA_FLOAT, rows);
  g.pointwise("log sum", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, z, nullptr, nullptr, log_z);
  g.pointwise("stats", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, log_z, nullptr, stats);
  auto p = g.virtual_tensor("P", io, scores);
  g.pointwise("exp / sum", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, nullptr, p);
  g.matmul("P V", p, v, o);
}

// A shape's finalized plan, or why there is none.
struct Plan {
  Graph graph;
  std::unique_ptr<Desc> op_graph, plan;
  int64_t workspace = 0;
  std::string unsupported;
};

// The first engine config of the heuristics (mode A, then the fallback list) that finalizes into a plan.
void find_plan(Plan& p, cudnnHandle_t handle) {
  std::string last = "heuristics: no engine config";
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const std::string step = mode == CUDNN_HEUR_MODE_A ? "heuristics (mode A)" : "heuristics (fallback)";
    try {
      Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, step);
      heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, p.op_graph->get())
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode)
          .finalize();
      int64_t n = 0;
      check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                                     nullptr),
            step, "cudnnBackendGetAttribute");
      std::vector<std::unique_ptr<Desc>> configs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < n; ++i) {
        configs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, step));
        raw.push_back(configs.back()->get());
      }
      int64_t got = 0;
      if (n > 0)
        check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
                                       &got, raw.data()),
              step, "cudnnBackendGetAttribute");
      if (got == 0) last = step + ": no engine config for this graph";
      for (int64_t i = 0; i < got; ++i) {
        try {
          auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
          plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle)
              .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw[size_t(i)])
              .finalize();
          int64_t count = 0;
          check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         &count, &p.workspace),
                "execution plan", "cudnnBackendGetAttribute");
          p.plan = std::move(plan);
          return;
        } catch (const StepFailed& e) {
          last = std::string(e.what()) + " (each of " + std::to_string(got) + " engine configs failed; the last)";
        }
      }
    } catch (const StepFailed& e) {
      last = e.what();
    }
  }
  throw StepFailed(last);
}

std::shared_ptr<Plan> make_plan(const Shape& sh) {
  auto p = std::make_shared<Plan>();
  const std::string version = "cuDNN " + cudnn_version();
  if (cudnnGetVersion() < 90000) {
    p->unsupported = version + " is older than 9.0, whose backend API this graph is written for";
    return p;
  }
  if (sh.dtype != mdl::kF16 && sh.dtype != mdl::kBF16) {
    p->unsupported = version + ": the fused attention graph takes f16 or bf16 inputs, not " +
                     std::string(mdl::dtype_name(sh.dtype));
    return p;
  }
  try {
    cudnnHandle_t handle = mdl::cuda::detail::cudnn();
    build_graph(p->graph, sh);
    p->op_graph = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    p->op_graph
        ->set_n(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(p->graph.ops.size()),
                p->graph.ops.data())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle)
        .finalize();
    find_plan(*p, handle);
  } catch (const StepFailed& e) {
    p->plan.reset();
    p->unsupported = version + ": " + e.what();
  }
  return p;
}

Shape shape_of(const Tensor& q, const Tensor& k, bool causal) {
  MDL_CHECK(q.dim() == 4 && k.dim() == 4, "cudnn_sdpa: q and k must be (B, H, T, D), got ", q.shape(), " and ",
            k.shape());
  MDL_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3) && q.dtype() == k.dtype(),
            "cudnn_sdpa: q ", q.shape(), " and k ", k.shape(), " differ in batch, heads, head dim or dtype");
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), q.dtype(), causal};
}

// Plans by shape, built on first use and kept for the process.
std::shared_ptr<Plan> plan_for(const Shape& sh) {
  static std::mutex mu;
  static std::map<decltype(sh.key()), std::shared_ptr<Plan>> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = plans[sh.key()];
  if (!p) p = make_plan(sh);
  return p;
}

}  // namespace

std::string cudnn_sdpa_unsupported(const Tensor& q, const Tensor& k, bool causal) {
  return plan_for(shape_of(q, k, causal))->unsupported;
}

CudnnSdpa cudnn_sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale) {
  const Shape sh = shape_of(q, k, causal);
  MDL_CHECK(v.shape() == k.shape() && v.dtype() == k.dtype(), "cudnn_sdpa: v ", v.shape(), " must be like k ",
            k.shape());
  for (const Tensor* t : {&q, &k, &v})
    MDL_CHECK(t->device().is_cuda() && t->is_contiguous(), "cudnn_sdpa: q, k and v must be contiguous on the GPU");
  const std::shared_ptr<Plan> p = plan_for(sh);
  if (!p->plan) MDL_FAIL("cudnn_sdpa: ", p->unsupported);
  CudnnSdpa r{mdl::empty(q.shape(), mdl::TensorOptions(q.dtype(), q.device())),
              mdl::empty({sh.b, sh.h, sh.l, 1}, mdl::TensorOptions(mdl::kF32, q.device()))};
  Tensor workspace = mdl::empty({p->workspace > 0 ? p->workspace : 1}, mdl::TensorOptions(mdl::kU8, q.device()));
  float lowest = std::numeric_limits<float>::lowest();
  std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs{q.raw_data(), k.raw_data(), v.raw_data(), r.out.raw_data(), r.stats.raw_data(), &scale};
  if (causal) {
    uids.push_back(kLowest);
    ptrs.push_back(&lowest);
  }
  try {
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    void* ws = workspace.raw_data();
    pack.set_n(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
        .set_n(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()), ptrs.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, ws)
        .finalize();
    check(cudnnBackendExecute(mdl::cuda::detail::cudnn(), p->plan->get(), pack.get()), "execute",
          "cudnnBackendExecute");
  } catch (const StepFailed& e) {
    MDL_FAIL("cudnn_sdpa: cuDNN ", cudnn_version(), ": ", e.what());
  }
  return r;
}

}  // namespace bench
