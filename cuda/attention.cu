// Fused scaled-dot-product attention on the GPU, forward beside backward (the contract of
// kernels/attention.h, the results of cpu/attention.cpp). A straightforward fused
// kernel, not FlashAttention: one block of 256 threads per query row walks the keys in tiles of
// 256, one key per thread, with an online softmax in f32 (f64 for f64); no (L, S) matrix is ever
// stored. The backward recomputes the probabilities from the saved logsumexp: one kernel per
// query row for dq, one per key row for dk and dv, so every sum has a fixed order (no atomics).
// f16/bf16 with head dims up to 128 go to the tensor-core FlashAttention-2 kernels of
// cuda/flash_attention.cu instead while toggles::flash_attention() is on.
#include "cuda/attention_operands.cuh"
#include "cuda/flash_attention.cuh"
#include "cuda/kernels.cuh"
#include "cuda/rows.cuh"

namespace mdl::cuda {

using namespace detail;
using namespace attn;

namespace {

constexpr int kTile = kRowBlock;  // keys (or queries) per tile: one per thread

// What every kernel needs: sizes, operands, masking.
struct Geometry {
  Batch g;
  int64_t L, S, E, Ev;
  Operand q, k, v, mask, go;
  Operand o, dq, dk, dv;  // the outputs (out also read by the backward): unit column stride
  const bool* mask_p;
  bool causal;
  double scale;

  __device__ __forceinline__ bool visible(int64_t b, int64_t i, int64_t j) const {
    if (causal && j > i) return false;
    return !mask_p || mask_p[mask.base(g, b) + i * mask.rs + j * mask.cs];
  }
};

template <class A>
__device__ __forceinline__ A nan_max(A m, A v) {
  return (v > m || v != v) && m == m ? v : m;
}

// sum_e a[e] * x[e * stride] with a in shared memory.
template <class T, class A>
__device__ __forceinline__ A dot(const A* a, const T* x, int64_t stride, int64_t n) {
  A s = 0;
  for (int64_t e = 0; e < n; ++e) s += a[e] * to_acc(x[e * stride]);
  return s;
}

// ---- forward: out = softmax(mask(q k^T * scale)) v, lse per row ------------------------------------

// Shared: sq (E), acc (Ev), sp (kTile).
template <class T>
__global__ void attention_forward_kernel(Geometry G, T* out, acc_t<T>* lse, const T* q, const T* k, const T* v) {
  using A = acc_t<T>;
  extern __shared__ unsigned char smem[];
  A* sq = reinterpret_cast<A*>(smem);
  A* acc = sq + G.E;
  A* sp = acc + G.Ev;
  for (int64_t row = blockIdx.x; row < G.g.count * G.L; row += gridDim.x) {
    const int64_t b = row / G.L, i = row % G.L;
    const T* qi = q + G.q.base(G.g, b) + i * G.q.rs;
    const T* kb = k + G.k.base(G.g, b);
    const T* vb = v + G.v.base(G.g, b);
    for (int64_t e = threadIdx.x; e < G.E; e += kTile) sq[e] = to_acc(qi[e * G.q.cs]);
    for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) acc[e] = 0;
    __syncthreads();
    const int64_t kend = G.causal ? min(G.S, i + 1) : G.S;
    A m = -INFINITY, l = 0;
    for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
      const int64_t j = j0 + threadIdx.x, n = min(int64_t(kTile), kend - j0);
      A s = -INFINITY;
      if (j < kend && G.visible(b, i, j)) s = dot(sq, kb + j * G.k.rs, G.k.cs, G.E) * A(G.scale);
      const A mn = nan_max(m, block_max(s));
      if (mn == -INFINITY) continue;  // nothing visible yet (uniform across the block)
      const A alpha = exp(m - mn);    // 0 on the first visible tile
      const A p = s == -INFINITY ? A(0) : exp(s - mn);
      sp[threadIdx.x] = p;
      l = l * alpha + block_sum(p);  // block_sum's barriers publish sp
      for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) {
        A a = acc[e] * alpha;
        for (int64_t t = 0; t < n; ++t) a += sp[t] * to_acc(vb[(j0 + t) * G.v.rs + e * G.v.cs]);
        acc[e] = a;
      }
      m = mn;
      __syncthreads();  // sp is rewritten by the next tile
    }
    T* o = out + G.o.base(G.g, b) + i * G.o.rs;
    const bool none = m == -INFINITY;  // a row that sees no key: zeros, lse = +inf
    for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) o[e] = convert<T>(none ? A(0) : acc[e] / l);
    if (threadIdx.x == 0) lse[row] = none ? A(INFINITY) : m + ::log(l);
    __syncthreads();  // sq and acc are reused by the next row
  }
}

// ---- backward: dv = P^T dO, dS = P * (dO v^T - D), D = rowsum(dO * O), dq = dS k * scale, dk = dS^T q * scale

// D (N * L) = rowsum(dO * O), one block per row.
template <class T>
__global__ void attention_delta_kernel(Geometry G, acc_t<T>* D, const T* go, const T* out) {
  using A = acc_t<T>;
  for (int64_t row = blockIdx.x; row < G.g.count * G.L; row += gridDim.x) {
    const int64_t b = row / G.L, i = row % G.L;
    const T* g = go + G.go.base(G.g, b) + i * G.go.rs;
    const T* o = out + G.o.base(G.g, b) + i * G.o.rs;
    A s = 0;
    for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) s += to_acc(g[e * G.go.cs]) * to_acc(o[e * G.o.cs]);
    s = block_sum(s);
    if (threadIdx.x == 0) D[row] = s;
  }
}

// One block per query row: dq (E). Shared: sq (E), sg (Ev), acc (E), sp (kTile).
template <class T>
__global__ void attention_dq_kernel(Geometry G, T* dq, const acc_t<T>* lse, const acc_t<T>* D, const T* q, const T* k,
                                    const T* v, const T* go) {
  using A = acc_t<T>;
  extern __shared__ unsigned char smem[];
  A* sq = reinterpret_cast<A*>(smem);
  A* sg = sq + G.E;
  A* acc = sg + G.Ev;
  A* sp = acc + G.E;
  for (int64_t row = blockIdx.x; row < G.g.count * G.L; row += gridDim.x) {
    const int64_t b = row / G.L, i = row % G.L;
    const T* qi = q + G.q.base(G.g, b) + i * G.q.rs;
    const T* gi = go + G.go.base(G.g, b) + i * G.go.rs;
    const T* kb = k + G.k.base(G.g, b);
    const T* vb = v + G.v.base(G.g, b);
    for (int64_t e = threadIdx.x; e < G.E; e += kTile) sq[e] = to_acc(qi[e * G.q.cs]), acc[e] = 0;
    for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) sg[e] = to_acc(gi[e * G.go.cs]);
    __syncthreads();
    const A li = lse[row], di = D[row];
    const int64_t kend = G.causal ? min(G.S, i + 1) : G.S;
    for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
      const int64_t j = j0 + threadIdx.x, n = min(int64_t(kTile), kend - j0);
      A ds = 0;
      if (j < kend && G.visible(b, i, j)) {
        const A p = exp(dot(sq, kb + j * G.k.rs, G.k.cs, G.E) * A(G.scale) - li);  // 0 when lse = +inf
        ds = p * (dot(sg, vb + j * G.v.rs, G.v.cs, G.Ev) - di);
      }
      sp[threadIdx.x] = ds;
      __syncthreads();
      for (int64_t e = threadIdx.x; e < G.E; e += kTile) {
        A a = acc[e];
        for (int64_t t = 0; t < n; ++t) a += sp[t] * to_acc(kb[(j0 + t) * G.k.rs + e * G.k.cs]);
        acc[e] = a;
      }
      __syncthreads();
    }
    T* dqi = dq + G.dq.base(G.g, b) + i * G.dq.rs;
    for (int64_t e = threadIdx.x; e < G.E; e += kTile) dqi[e] = convert<T>(acc[e] * A(G.scale));
    __syncthreads();
  }
}

// One block per key row: dk (E) and dv (Ev). Shared: sk (E), sv (Ev), ak (E), av (Ev), sp, sds (kTile each).
template <class T>
__global__ void attention_dkdv_kernel(Geometry G, T* dk, T* dv, const acc_t<T>* lse, const acc_t<T>* D, const T* q,
                                      const T* k, const T* v, const T* go) {
  using A = acc_t<T>;
  extern __shared__ unsigned char smem[];
  A* sk = reinterpret_cast<A*>(smem);
  A* sv = sk + G.E;
  A* ak = sv + G.Ev;
  A* av = ak + G.E;
  A* sp = av + G.Ev;
  A* sds = sp + kTile;
  for (int64_t col = blockIdx.x; col < G.g.count * G.S; col += gridDim.x) {
    const int64_t b = col / G.S, j = col % G.S;
    const T* kj = k + G.k.base(G.g, b) + j * G.k.rs;
    const T* vj = v + G.v.base(G.g, b) + j * G.v.rs;
    const T* qb = q + G.q.base(G.g, b);
    const T* gb = go + G.go.base(G.g, b);
    for (int64_t e = threadIdx.x; e < G.E; e += kTile) sk[e] = to_acc(kj[e * G.k.cs]), ak[e] = 0;
    for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) sv[e] = to_acc(vj[e * G.v.cs]), av[e] = 0;
    __syncthreads();
    const int64_t ibeg = G.causal ? min(j, G.L) : 0;  // causal: only queries i >= j see key j
    for (int64_t i0 = ibeg; i0 < G.L; i0 += kTile) {
      const int64_t i = i0 + threadIdx.x, n = min(int64_t(kTile), G.L - i0);
      A p = 0, ds = 0;
      if (i < G.L && G.visible(b, i, j)) {
        const int64_t row = b * G.L + i;
        p = exp(dot(sk, qb + i * G.q.rs, G.q.cs, G.E) * A(G.scale) - lse[row]);
        ds = p * (dot(sv, gb + i * G.go.rs, G.go.cs, G.Ev) - D[row]);
      }
      sp[threadIdx.x] = p;
      sds[threadIdx.x] = ds;
      __syncthreads();
      for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) {
        A a = av[e];
        for (int64_t t = 0; t < n; ++t) a += sp[t] * to_acc(gb[(i0 + t) * G.go.rs + e * G.go.cs]);
        av[e] = a;
      }
      for (int64_t e = threadIdx.x; e < G.E; e += kTile) {
        A a = ak[e];
        for (int64_t t = 0; t < n; ++t) a += sds[t] * to_acc(qb[(i0 + t) * G.q.rs + e * G.q.cs]);
        ak[e] = a;
      }
      __syncthreads();
    }
    if (dk) {
      T* dkj = dk + G.dk.base(G.g, b) + j * G.dk.rs;
      for (int64_t e = threadIdx.x; e < G.E; e += kTile) dkj[e] = convert<T>(ak[e] * A(G.scale));
    }
    if (dv) {
      T* dvj = dv + G.dv.base(G.g, b) + j * G.dv.rs;
      for (int64_t e = threadIdx.x; e < G.Ev; e += kTile) dvj[e] = convert<T>(av[e]);
    }
    __syncthreads();
  }
}

Geometry geometry(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                  const Tensor& go, bool causal, double scale) {
  Geometry G;
  G.g = batch_of(op, q);
  G.L = q.size(-2), G.S = k.size(-2), G.E = q.size(-1), G.Ev = v.size(-1);
  G.q = operand(q), G.k = operand(k), G.v = operand(v), G.mask = operand(mask), G.go = operand(go);
  G.mask_p = mask.defined() ? ptr<const bool>(mask) : nullptr;
  G.causal = causal;
  G.scale = scale;
  return G;
}

// Dynamic shared memory of `elems` stat elements, checked against the 48 KiB a launch may ask for.
size_t shared_bytes(const char* op, int64_t elems, size_t elem_size, const Tensor& q, const Tensor& v) {
  const size_t bytes = size_t(elems) * elem_size;
  MDL_CHECK(bytes <= 48 * 1024, op, ": head dims E=", q.size(-1), ", Ev=", v.size(-1), " are too large for the ",
            "CUDA attention kernel (", bytes, " bytes of shared memory, 48 KiB at most)");
  return bytes;
}

unsigned grid_for(int64_t n) { return unsigned(std::min<int64_t>(std::max<int64_t>(n, 1), 1 << 20)); }

}  // namespace

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& mask, bool causal, double scale) {
  if (flash_attention_applies(q, v)) return flash_attention_forward(out, lse, q, k, v, mask, causal, scale);
  const char* op = "scaled_dot_product_attention";
  Geometry G = geometry(op, q, k, v, mask, Tensor(), causal, scale);
  G.o = output(op, out);
  const int64_t rows = G.g.count * G.L;
  if (rows == 0) return;
  dispatch_floating<DeviceTypes>(q.dtype(), op, [&]<class T>() {
    using A = acc_t<T>;
    const size_t sh = shared_bytes(op, G.E + G.Ev + kTile, sizeof(A), q, v);
    attention_forward_kernel<T><<<grid_for(rows), kTile, sh, stream()>>>(G, ptr<T>(out), ptr<A>(lse), ptr<const T>(q),
                                                                         ptr<const T>(k), ptr<const T>(v));
    CUDA_CHECK_LAUNCH(op);
  });
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
                        bool causal, double scale) {
  if (flash_attention_applies(q, v))
    return flash_attention_backward(dq, dk, dv, grad_out, q, k, v, out, lse, mask, causal, scale);
  const char* op = "scaled_dot_product_attention_backward";
  Geometry G = geometry(op, q, k, v, mask, grad_out, causal, scale);
  G.o = operand(out), G.dq = output(op, dq), G.dk = output(op, dk), G.dv = output(op, dv);
  const int64_t rows = G.g.count * G.L, cols = G.g.count * G.S;
  dispatch_floating<DeviceTypes>(q.dtype(), op, [&]<class T>() {
    using A = acc_t<T>;
    if (rows == 0 || G.S == 0) {  // nothing to attend: every wanted gradient is zero
      for (const Tensor* t : {&dq, &dk, &dv})
        if (t->defined() && t->numel()) cuda::fill(*t, 0.0);
      return;
    }
    Tensor D = make_tensor({rows}, lse.dtype(), q.device());
    attention_delta_kernel<T>
        <<<grid_for(rows), kTile, 0, stream()>>>(G, ptr<A>(D), ptr<const T>(grad_out), ptr<const T>(out));
    CUDA_CHECK_LAUNCH(op);
    if (dq.defined()) {
      const size_t sh = shared_bytes(op, 2 * G.E + G.Ev + kTile, sizeof(A), q, v);
      attention_dq_kernel<T><<<grid_for(rows), kTile, sh, stream()>>>(G, ptr<T>(dq), ptr<const A>(lse), ptr<const A>(D),
                                                                      ptr<const T>(q), ptr<const T>(k), ptr<const T>(v),
                                                                      ptr<const T>(grad_out));
      CUDA_CHECK_LAUNCH(op);
    }
    if (dk.defined() || dv.defined()) {
      const size_t sh = shared_bytes(op, 2 * G.E + 2 * G.Ev + 2 * kTile, sizeof(A), q, v);
      attention_dkdv_kernel<T><<<grid_for(cols), kTile, sh, stream()>>>(
          G, dk.defined() ? ptr<T>(dk) : nullptr, dv.defined() ? ptr<T>(dv) : nullptr, ptr<const A>(lse),
          ptr<const A>(D), ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const T>(grad_out));
      CUDA_CHECK_LAUNCH(op);
    }
  });
}

}  // namespace mdl::cuda
