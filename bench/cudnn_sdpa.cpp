// cuDNN's fused flash attention (bench/cudnn_sdpa.h) as operation graphs of the backend API
// (bench/cudnn_backend.h), in the patterns cuDNN 9 documents for its fused flash attention.
// Forward:
//   S = Q K^T (matmul; K^T is K's memory with the last two dims and strides swapped)
//   S = S * scale (pointwise, the scale passed by value)
//   causal: S = row >= col ? S : lowest float (GEN_INDEX on both axes, CMP_GE, BINARY_SELECT)
//   m = max(S), E = exp(S - m), z = sum(E) (row reductions and pointwise), stats = m + log(z)
//   P = E / z in the inputs' dtype (the second matmul's A operand must be), O = P V (matmul)
// Backward, from the forward's stats:
//   D = rowsum(dO * O); P = exp(S - stats) with S as above; dV = P^T dO (P^T a reshape)
//   dS = (dO V^T - D) * P * scale; dK = dS^T Q; dQ = dS K into a zeroed f32 accumulator, then dQ
// Every intermediate is virtual and f32 but the matmuls' A operands (P, P^T, dS^T: the inputs'
// dtype), the stats and the dQ accumulator. cuDNN releases have asked for the backward in more than
// one form (D virtual or in memory, the accumulator reordered or not), so the backward tries each
// form in turn (BackwardForm) and keeps the first cuDNN plans. Each backend call is checked: a failure
// names the step, cuDNN's status, message and version, and becomes the reason the shape is unsupported.
#include "bench/cudnn_sdpa.h"

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

#include "bench/cudnn_backend.h"
#include "cuda/runtime/context.cuh"
#include "mdl.h"

namespace bench {
namespace {

using mdl::Tensor;
using namespace cudnn;

// The unique ids of the tensors the variant pack binds; virtual tensors number from kFirstVirtual.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kLowest, kOne, kdO, kdQ, kdK, kdV, kdQAccum, kSoftmaxSum };

// How the backward graph is written: D = rowsum(dO * O) as a virtual tensor or in an f32 (B, H, L, 1)
// buffer of the caller's (as cudnn-frontend writes it for recent cuDNN releases), and the f32 dQ
// accumulator with cuDNN's F16x16 reordering or plain. Tried in this order.
struct BackwardForm {
  bool softmax_sum_in_memory, dq_reordered;
  std::string describe() const {
    return std::string("D ") + (softmax_sum_in_memory ? "in memory" : "virtual") + ", dQ accumulator " +
           (dq_reordered ? "F16x16-reordered" : "plain");
  }
};
constexpr BackwardForm kBackwardForms[] = {{false, true}, {true, true}, {true, false}};

struct Shape {
  int64_t b, h, l, s, d;
  mdl::DType dtype;
  bool causal;
  bool backward;
  auto key() const { return std::tuple(b, h, l, s, d, int(dtype), causal, backward); }
};

cudnnDataType_t io_type(const Shape& sh) { return sh.dtype == mdl::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }

// The scale, passed by value.
cudnnBackendDescriptor_t scale_tensor(Graph& g) {
  const Dims one{1, 1, 1, 1};
  return g.tensor("scale", CUDNN_DATA_FLOAT, one, one, kScale, true);
}

// S = scale * Q K^T with the causal mask: (B, H, L, S) f32, virtual.
cudnnBackendDescriptor_t scores(Graph& g, const Shape& sh, cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
                                cudnnBackendDescriptor_t scale) {
  const Dims dims{sh.b, sh.h, sh.l, sh.s}, one{1, 1, 1, 1};
  auto s = g.virtual_tensor("S", CUDNN_DATA_FLOAT, dims);
  g.matmul("Q K^T", q, kt, s);
  auto scaled = g.f32_pointwise("S * scale", CUDNN_POINTWISE_MUL, dims, s, scale);
  if (!sh.causal) return scaled;
  auto row = g.virtual_tensor("row index", CUDNN_DATA_INT32, dims);
  g.pointwise("row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, scaled, nullptr, nullptr, row, 2);
  auto col = g.virtual_tensor("col index", CUDNN_DATA_INT32, dims);
  g.pointwise("col index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, scaled, nullptr, nullptr, col, 3);
  auto keep = g.virtual_tensor("row >= col", CUDNN_DATA_BOOLEAN, dims);
  g.pointwise("row >= col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
  auto lowest = g.tensor("lowest", CUDNN_DATA_FLOAT, one, one, kLowest, true);
  auto masked = g.virtual_tensor("masked S", CUDNN_DATA_FLOAT, dims);
  g.pointwise("causal select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scaled, lowest, keep, masked);
  return masked;
}

// The (B, H, S, D) tensor `uid` as (B, H, D, S): its memory with the last two dims and strides swapped.
cudnnBackendDescriptor_t transposed(Graph& g, const Shape& sh, const std::string& name, int64_t uid) {
  return g.tensor(name, io_type(sh), {sh.b, sh.h, sh.d, sh.s}, {sh.h * sh.s * sh.d, sh.s * sh.d, 1, sh.d}, uid);
}

// Q (B, H, L, D), K and V (B, H, S, D), O like Q, stats (B, H, L, 1).
void build_forward(Graph& g, const Shape& sh) {
  const cudnnDataType_t io = io_type(sh);
  const Dims q_dims{sh.b, sh.h, sh.l, sh.d}, kv_dims{sh.b, sh.h, sh.s, sh.d};
  const Dims score_dims{sh.b, sh.h, sh.l, sh.s}, rows{sh.b, sh.h, sh.l, 1};
  auto q = g.tensor("Q", io, q_dims, contiguous(q_dims), kQ);
  auto kt = transposed(g, sh, "K^T", kK);
  auto v = g.tensor("V", io, kv_dims, contiguous(kv_dims), kV);
  auto o = g.tensor("O", io, q_dims, contiguous(q_dims), kO);
  auto stats = g.tensor("stats", CUDNN_DATA_FLOAT, rows, contiguous(rows), kStats);
  auto s = scores(g, sh, q, kt, scale_tensor(g));
  auto m = g.virtual_tensor("row max", CUDNN_DATA_FLOAT, rows);
  g.reduction("row max", CUDNN_REDUCE_TENSOR_MAX, s, m);
  auto centred = g.f32_pointwise("S - max", CUDNN_POINTWISE_SUB, score_dims, s, m);
  auto e = g.f32_pointwise("exp", CUDNN_POINTWISE_EXP, score_dims, centred);
  auto z = g.virtual_tensor("row sum", CUDNN_DATA_FLOAT, rows);
  g.reduction("row sum", CUDNN_REDUCE_TENSOR_ADD, e, z);
  auto log_z = g.f32_pointwise("log sum", CUDNN_POINTWISE_LOG, rows, z);
  g.pointwise("stats", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, log_z, nullptr, stats);
  auto p = g.virtual_tensor("P", io, score_dims);
  g.pointwise("exp / sum", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, nullptr, p);
  g.matmul("P V", p, v, o);
}

// Adds dO (like O) and writes dQ (like Q), dK and dV (like K), dQ through an f32 accumulator
// (B, H, L, D) the caller zeroes, in the given form.
void build_backward(Graph& g, const Shape& sh, const BackwardForm& form) {
  const cudnnDataType_t io = io_type(sh), f32 = CUDNN_DATA_FLOAT;
  const Dims q_dims{sh.b, sh.h, sh.l, sh.d}, kv_dims{sh.b, sh.h, sh.s, sh.d};
  const Dims score_dims{sh.b, sh.h, sh.l, sh.s}, rows{sh.b, sh.h, sh.l, 1}, one_dims{1, 1, 1, 1};
  const Dims scores_t{sh.b, sh.h, sh.s, sh.l}, scores_t_strides{sh.h * sh.l * sh.s, sh.l * sh.s, 1, sh.s};
  auto q = g.tensor("Q", io, q_dims, contiguous(q_dims), kQ);
  auto kt = transposed(g, sh, "K^T", kK);
  auto vt = transposed(g, sh, "V^T", kV);
  auto o = g.tensor("O", io, q_dims, contiguous(q_dims), kO);
  auto d_o = g.tensor("dO", io, q_dims, contiguous(q_dims), kdO);
  auto stats = g.tensor("stats", f32, rows, contiguous(rows), kStats);
  auto one = g.tensor("one", f32, one_dims, one_dims, kOne, true);
  auto dq = g.tensor("dQ", io, q_dims, contiguous(q_dims), kdQ);
  auto dk = g.tensor("dK", io, kv_dims, contiguous(kv_dims), kdK);
  auto dv = g.tensor("dV", io, kv_dims, contiguous(kv_dims), kdV);
  auto dq_accum = g.tensor("dQ accumulator", f32, q_dims, contiguous(q_dims), kdQAccum, false, form.dq_reordered);

  auto prod = g.f32_pointwise("dO * O", CUDNN_POINTWISE_MUL, q_dims, d_o, o);
  auto row_dot = g.virtual_tensor("rowsum(dO * O)", f32, rows);
  g.reduction("rowsum(dO * O)", CUDNN_REDUCE_TENSOR_ADD, prod, row_dot);
  auto softmax_sum = form.softmax_sum_in_memory ? g.tensor("softmax sum", f32, rows, contiguous(rows), kSoftmaxSum)
                                                : g.virtual_tensor("softmax sum", f32, rows);
  g.pointwise("softmax sum", CUDNN_POINTWISE_MUL, f32, row_dot, one, nullptr, softmax_sum);

  auto scale = scale_tensor(g);
  auto s = scores(g, sh, q, kt, scale);
  auto centred = g.f32_pointwise("S - stats", CUDNN_POINTWISE_SUB, score_dims, s, stats);
  auto p = g.f32_pointwise("P", CUDNN_POINTWISE_EXP, score_dims, centred);
  auto pt = g.virtual_tensor("P^T", io, scores_t, scores_t_strides);
  g.reshape("P^T", p, pt);
  g.matmul("P^T dO", pt, d_o, dv);

  auto dp = g.virtual_tensor("dO V^T", f32, score_dims);
  g.matmul("dO V^T", d_o, vt, dp);
  auto dp_one = g.f32_pointwise("dP * 1", CUDNN_POINTWISE_MUL, score_dims, dp, one);
  auto dp_sub = g.f32_pointwise("dP - softmax sum", CUDNN_POINTWISE_SUB, score_dims, dp_one, softmax_sum);
  auto dp_p = g.f32_pointwise("(dP - sum) * P", CUDNN_POINTWISE_MUL, score_dims, dp_sub, p);
  auto ds = g.f32_pointwise("dS", CUDNN_POINTWISE_MUL, score_dims, dp_p, scale);
  auto dst = g.virtual_tensor("dS^T", io, scores_t, scores_t_strides);
  g.reshape("dS^T", ds, dst);
  g.matmul("dS^T Q", dst, q, dk);
  auto k = g.virtual_tensor("K", io, kv_dims);
  g.reshape("K", kt, k);
  g.matmul("dS K", ds, k, dq_accum);
  g.pointwise("dQ", CUDNN_POINTWISE_IDENTITY, f32, dq_accum, nullptr, nullptr, dq);
}

// A shape's finalized plan, or why there is none.
struct Plan {
  Graph graph;
  std::unique_ptr<Desc> op_graph, config, plan;  // the plan's engine config kept alive beside it
  int64_t workspace = 0;
  bool backward = false;
  BackwardForm form{};  // the backward's form cuDNN planned
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
          p.config = std::move(configs[size_t(i)]);
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
  p->backward = sh.backward;
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
  const auto plan_graph = [&](Plan& plan) {
    cudnnHandle_t handle = mdl::cuda::detail::cudnn();
    plan.op_graph = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    plan.op_graph
        ->set_n(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(plan.graph.ops.size()),
                plan.graph.ops.data())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle)
        .finalize();
    find_plan(plan, handle);
  };
  if (!sh.backward) {
    try {
      build_forward(p->graph, sh);
      plan_graph(*p);
    } catch (const StepFailed& e) {
      p->plan.reset();
      p->unsupported = version + ": " + e.what();
    }
    return p;
  }
  std::string why;
  for (const BackwardForm& form : kBackwardForms) {
    auto attempt = std::make_shared<Plan>();
    attempt->backward = true;
    attempt->form = form;
    try {
      build_backward(attempt->graph, sh, form);
      plan_graph(*attempt);
      return attempt;
    } catch (const StepFailed& e) {
      why += std::string(why.empty() ? "" : "; ") + form.describe() + ": " + e.what();
    }
  }
  p->unsupported = version + ": every form of the backward graph failed (" + why + ")";
  return p;
}

Shape shape_of(const Tensor& q, const Tensor& k, bool causal, bool backward) {
  MDL_CHECK(q.dim() == 4 && k.dim() == 4, "cudnn_sdpa: q and k must be (B, H, T, D), got ", q.shape(), " and ",
            k.shape());
  MDL_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3) && q.dtype() == k.dtype(),
            "cudnn_sdpa: q ", q.shape(), " and k ", k.shape(), " differ in batch, heads, head dim or dtype");
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), q.dtype(), causal, backward};
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

// The shape's plan for q, k and v, which must be contiguous on the GPU with v like k.
std::shared_ptr<Plan> checked_plan(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, bool backward) {
  const Shape sh = shape_of(q, k, causal, backward);
  MDL_CHECK(v.shape() == k.shape() && v.dtype() == k.dtype(), "cudnn_sdpa: v ", v.shape(), " must be like k ",
            k.shape());
  for (const Tensor* t : {&q, &k, &v})
    MDL_CHECK(t->device().is_cuda() && t->is_contiguous(), "cudnn_sdpa: q, k and v must be contiguous on the GPU");
  std::shared_ptr<Plan> p = plan_for(sh);
  if (!p->plan) MDL_FAIL("cudnn_sdpa: ", p->unsupported);
  return p;
}

// Runs the plan on mdl's stream with the tensors bound by uid (the scale and, when causal, the
// lowest float by value, and the backward's 1) and a workspace from mdl's allocator.
void execute(const Plan& p, std::vector<int64_t> uids, std::vector<void*> ptrs, bool causal, float* scale,
             const mdl::Device& device) {
  float lowest = std::numeric_limits<float>::lowest(), one = 1.0f;
  uids.push_back(kScale);
  ptrs.push_back(scale);
  if (p.backward) {
    uids.push_back(kOne);
    ptrs.push_back(&one);
  }
  if (causal) {
    uids.push_back(kLowest);
    ptrs.push_back(&lowest);
  }
  Tensor workspace = mdl::empty({p.workspace > 0 ? p.workspace : 1}, mdl::TensorOptions(mdl::kU8, device));
  try {
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    void* ws = workspace.raw_data();
    pack.set_n(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
        .set_n(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()), ptrs.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, ws)
        .finalize();
    check(cudnnBackendExecute(mdl::cuda::detail::cudnn(), p.plan->get(), pack.get()), "execute", "cudnnBackendExecute");
  } catch (const StepFailed& e) {
    MDL_FAIL("cudnn_sdpa: cuDNN ", cudnn_version(), ": ", e.what());
  }
}

}  // namespace

std::string cudnn_sdpa_unsupported(const Tensor& q, const Tensor& k, bool causal) {
  return plan_for(shape_of(q, k, causal, false))->unsupported;
}

std::string cudnn_sdpa_backward_unsupported(const Tensor& q, const Tensor& k, bool causal) {
  return plan_for(shape_of(q, k, causal, true))->unsupported;
}

std::string cudnn_sdpa_backward_form(const Tensor& q, const Tensor& k, bool causal) {
  const std::shared_ptr<Plan> p = plan_for(shape_of(q, k, causal, true));
  return p->plan ? p->form.describe() : std::string();
}

CudnnSdpa cudnn_sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale) {
  const std::shared_ptr<Plan> p = checked_plan(q, k, v, causal, false);
  CudnnSdpa r{mdl::empty(q.shape(), mdl::TensorOptions(q.dtype(), q.device())),
              mdl::empty({q.size(0), q.size(1), q.size(2), 1}, mdl::TensorOptions(mdl::kF32, q.device()))};
  execute(*p, {kQ, kK, kV, kO, kStats},
          {q.raw_data(), k.raw_data(), v.raw_data(), r.out.raw_data(), r.stats.raw_data()}, causal, &scale, q.device());
  return r;
}

CudnnSdpaGrads cudnn_sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const CudnnSdpa& forward,
                                   const Tensor& grad_out, bool causal, float scale) {
  const std::shared_ptr<Plan> p = checked_plan(q, k, v, causal, true);
  MDL_CHECK(forward.out.shape() == q.shape() && grad_out.shape() == q.shape() && grad_out.dtype() == q.dtype() &&
                grad_out.is_contiguous() && forward.stats.numel() == q.numel() / q.size(3),
            "cudnn_sdpa: the forward's output and stats and grad_out must match q ", q.shape());
  const mdl::TensorOptions io(q.dtype(), q.device());
  CudnnSdpaGrads g{mdl::empty(q.shape(), io), mdl::empty(k.shape(), io), mdl::empty(v.shape(), io)};
  Tensor dq_accum = mdl::zeros(q.shape(), mdl::TensorOptions(mdl::kF32, q.device()));
  std::vector<int64_t> uids{kQ, kK, kV, kO, kdO, kStats, kdQ, kdK, kdV, kdQAccum};
  std::vector<void*> ptrs{q.raw_data(),           k.raw_data(),        v.raw_data(),
                          forward.out.raw_data(), grad_out.raw_data(), forward.stats.raw_data(),
                          g.dq.raw_data(),        g.dk.raw_data(),     g.dv.raw_data(),
                          dq_accum.raw_data()};
  Tensor softmax_sum;  // D, where the form keeps it in memory
  if (p->form.softmax_sum_in_memory) {
    softmax_sum = mdl::empty(forward.stats.shape(), mdl::TensorOptions(mdl::kF32, q.device()));
    uids.push_back(kSoftmaxSum);
    ptrs.push_back(softmax_sum.raw_data());
  }
  execute(*p, std::move(uids), std::move(ptrs), causal, &scale, q.device());
  return g;
}

}  // namespace bench
