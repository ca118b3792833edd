// FlashAttention-2, forward beside backward, with the contract of kernels/attention.h: for f16/bf16
// on tensor cores (WMMA 16x16x16, f32 accumulators), for f32 with FMAs in f32 (cuda/flash_tiles.cuh
// holds both kinds of tile product). tests/support/flash_attention_reference.h runs the
// same algorithm on the CPU, tile for tile, where a test checks it against plain attention.
//
// A block of 4 warps takes a tile of 64 query rows (16 per warp) and streams tiles of 64 keys
// through shared memory: S = q k^T on tensor cores, an online softmax in f32 (running max m and
// sum l per row, the output rescaled by e^(m_old - m_new) when the max grows), then O += P v with
// P rounded to the input type. Only O, m and l of the tile live across key tiles; the logsumexp
// m + log(l) is kept for the backward.
//
// The backward recomputes P = e^(S - lse) per tile pair and never stores an (L, S) matrix. One
// kernel per key tile accumulates dv += P^T dO and dk += dS^T q (queries streamed), one per query
// tile dq += dS k (keys streamed), with dS = P * (dO v^T - D), D = rowsum(dO * O); every sum has
// a fixed order (no atomics), so results are deterministic. Head dims are zero-padded to 64 or
// 128 in shared memory. Under a causal mask the blocks take their tiles heaviest first
// (kernels/attention_tiles.h), so the last wave is short.
//
// With the flash_attention_mma switch, f16/bf16 run cuda/flash_forward_mma.cuh's forward and
// cuda/flash_backward_mma.cuh's backward instead: the same tiles, work split and results, with every
// product's accumulator in registers on mma.sync. With the flash_attention_tf32x3 switch, f32 runs the
// same register-tiled design on mma.sync.m16n8k8 with 3xTF32 products (cuda/flash_forward_tf32.cuh,
// cuda/flash_backward_tf32.cuh), close to f32 accuracy, instead of the FMA kernels.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <tuple>

#include "cuda/api.h"
#include "cuda/attention_operands.cuh"
#include "cuda/common.cuh"
#include "cuda/flash_attention.cuh"
#include "cuda/flash_common.cuh"
#include "cuda/flash_backward_mma.cuh"
#include "cuda/flash_backward_tf32.cuh"
#include "cuda/flash_forward_mma.cuh"
#include "cuda/flash_forward_tf32.cuh"
#include "cuda/flash_tiles.cuh"
#include "cuda/kernels.cuh"
#include "kernels/attention_tiles.h"
#include "switches/list/toggles.h"

namespace mdl::cuda {

using namespace detail;
using namespace attn;
using namespace flash;

namespace {

constexpr int kFlashThreads = flash::kThreads;

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = nan_max(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Writes the warp's (16, D) fragments times `mul` to rows [r0, r0 + 16) of the (n, cols) matrix dst
// (row stride rs, unit column stride), through a 16x16 float staging tile of its own.
template <class T, int D>
__device__ void store_rows(T* dst, int64_t rs, Acc<T> (&c)[D / 16], float* stage, int64_t r0, int64_t n, int64_t cols,
                           float mul) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int f = 0; f < D / 16; ++f) {
    store_acc(stage, c[f], 16);
    __syncwarp();
    for (int t = lane; t < 256; t += 32) {
      const int64_t r = r0 + t / 16, e = f * 16 + t % 16;
      if (r < n && e < cols) dst[r * rs + e] = convert<T>(stage[t] * mul);
    }
    __syncwarp();
  }
}

// ---- forward: out = softmax(mask(q k^T * scale)) v, lse per row ------------------------------------

// One block per (batch, tile of 64 query rows). Shared: q, k, v tiles (64, D); P (64, 64) in T;
// scores (64, 64) and the output accumulator (64, D) in f32; m and l (64).
template <class T, int D>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(FlashArgs a, T* out, float* lse, const T* q, const T* k, const T* v) {
  constexpr int P = pitch<T, D>(), PO = D + 4;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  T* sk = sq + kTile * P;
  T* sv = sk + kTile * P;
  T* sp = sv + kTile * P;
  float* ss = reinterpret_cast<float*>(sp + kTile * kPP);
  float* so = ss + kTile * kPS;
  float* sm = so + kTile * PO;
  float* sl = sm + kTile;
  const AttentionTile at = attention_tile(blockIdx.x, a.g.count, a.tiles, a.causal, AttentionTiles::Query);
  const int64_t b = at.batch, i0 = at.tile * kTile;
  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16;  // the warp's first row
  const T* kb = k + a.k.base(a.g, b);
  const T* vb = v + a.v.base(a.g, b);
  const bool* mb = a.mask_p ? a.mask_p + a.mask.base(a.g, b) : nullptr;
  load_tile<T, D>(sq, q + a.q.base(a.g, b), a.q, i0, a.L, a.E, a.vec_q);
  for (int idx = threadIdx.x; idx < kTile * PO; idx += kFlashThreads) so[idx] = 0;
  if (threadIdx.x < kTile) sm[threadIdx.x] = -INFINITY, sl[threadIdx.x] = 0;
  const int64_t kend = a.causal ? min(a.S, i0 + kTile) : a.S;  // causal: later keys are hidden from the whole tile
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    load_tile<T, D>(sk, kb, a.k, j0, a.S, a.E, a.vec_k);
    load_tile<T, D>(sv, vb, a.v, j0, a.S, a.Ev, a.vec_v);
    __syncthreads();
    // ss (16, 64) = q (16, D) @ k^T (D, 64), the warp's rows
    mma_abt<T, D>(ss + w0 * kPS, kPS, sq + w0 * P, P, sk, P);
    __syncwarp();
    // Online softmax, one row at a time, each lane two keys: m grows to m_new, O and l scale by alpha.
    for (int r = 0; r < 16; ++r) {
      const int row = w0 + r;
      const int64_t i = i0 + row;
      float s[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = lane + 32 * h;
        s[h] = a.visible(mb, i, j0 + c) ? ss[row * kPS + c] * a.scale : -INFINITY;
      }
      const float m_old = sm[row], m_new = nan_max(m_old, warp_max(nan_max(s[0], s[1])));
      const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);  // 0 on the first visible tile
      float sum = 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const T p = convert<T>(s[h] == -INFINITY ? 0.0f : expf(s[h] - m_new));
        sp[row * kPP + lane + 32 * h] = p;
        sum += to_acc(p);  // l sums P as v will be weighted by it
      }
      sum = warp_sum(sum);
      for (int e = lane; e < D; e += 32) so[row * PO + e] *= alpha;
      __syncwarp();  // every lane has read m and l
      if (lane == 0) sm[row] = m_new, sl[row] = sl[row] * alpha + sum;
    }
    __syncwarp();
    // so (16, D) += P (16, 64) @ v (64, D)
    Acc<T> o[D / 16];
#pragma unroll
    for (int n = 0; n < D / 16; ++n) load_acc(o[n], so + w0 * PO + n * 16, PO);
    mma_ab<T, D>(o, sp + w0 * kPP, kPP, sv, P);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) store_acc(so + w0 * PO + n * 16, o[n], PO);
    __syncthreads();  // k and v are rewritten by the next tile
  }
  __syncthreads();  // with no key tile at all, the initial O, m and l must still be visible
  // out = O / l; a row that sees no key (m = -inf): zeros, lse = +inf
  T* ob = out + a.o.base(a.g, b);
  for (int idx = threadIdx.x; idx < kTile * a.Ev; idx += kFlashThreads) {
    const int r = idx / int(a.Ev), e = idx % int(a.Ev);
    if (i0 + r < a.L) ob[(i0 + r) * a.o.rs + e] = convert<T>(sm[r] == -INFINITY ? 0.0f : so[r * PO + e] / sl[r]);
  }
  if (threadIdx.x < kTile && i0 + threadIdx.x < a.L) {
    const int r = threadIdx.x;
    lse[b * a.L + i0 + r] = sm[r] == -INFINITY ? INFINITY : sm[r] + logf(sl[r]);
  }
}

// ---- backward: P = e^(S - lse), dv += P^T dO, dS = P * (dO v^T - D), dq += dS k * scale, dk += dS^T q * scale

// D (N * L) = rowsum(dO * O), one warp per row.
template <class T>
__global__ void flash_delta_kernel(FlashArgs a, float* delta, const T* go, const T* out) {
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= a.g.count * a.L) return;
  const int64_t b = row / a.L, i = row % a.L;
  const T* g = go + a.go.base(a.g, b) + i * a.go.rs;
  const T* o = out + a.o.base(a.g, b) + i * a.o.rs;
  float s = 0;
  for (int64_t e = threadIdx.x % 32; e < a.Ev; e += 32) s += to_acc(g[e * a.go.cs]) * to_acc(o[e * a.o.cs]);
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) delta[row] = s;
}

// The backward kernels' shared memory: q, dO, k, v tiles (64, D); P and dS (64, 64) in T; S and
// dP (64, 64) in f32; a 16x16 staging tile per warp; lse and D of the query tile.
template <class T, int D>
struct BackwardTiles {
  static constexpr int P = pitch<T, D>();
  T *sq, *sdo, *sk, *sv, *sp, *sds;
  float *ss, *sdp, *stage, *slse, *sdelta;
  static constexpr size_t bytes() {
    return (4 * size_t(kTile) * P + 2 * size_t(kTile) * kPP) * sizeof(T) +
           (2 * size_t(kTile) * kPS + kWarps * 256 + 2 * kTile) * sizeof(float);
  }
  __device__ explicit BackwardTiles(unsigned char* smem) {
    sq = reinterpret_cast<T*>(smem);
    sdo = sq + kTile * P;
    sk = sdo + kTile * P;
    sv = sk + kTile * P;
    sp = sv + kTile * P;
    sds = sp + kTile * kPP;
    ss = reinterpret_cast<float*>(sds + kTile * kPP);
    sdp = ss + kTile * kPS;
    stage = sdp + kTile * kPS;
    slse = stage + kWarps * 256;
    sdelta = slse + kTile;
  }
  // The query tile's lse and D; +inf and 0 past L, so those rows get P = 0.
  __device__ void load_row_stats(const FlashArgs& a, int64_t b, int64_t i0, const float* lse, const float* delta) {
    if (threadIdx.x < kTile) {
      const int64_t i = i0 + threadIdx.x;
      slse[threadIdx.x] = i < a.L ? lse[b * a.L + i] : INFINITY;
      sdelta[threadIdx.x] = i < a.L ? delta[b * a.L + i] : 0.0f;
    }
  }
  // For the warp's 16 query rows (from w0) against the 64 keys of tile j0: sp = P and sds = dS,
  // rounded to T, 0 where hidden.
  __device__ void probs_and_dscores(const FlashArgs& a, const bool* mb, int64_t i0, int64_t j0, int w0) {
    mma_abt<T, D>(ss + w0 * kPS, kPS, sq + w0 * P, P, sk, P);    // S (16, 64) = q k^T
    mma_abt<T, D>(sdp + w0 * kPS, kPS, sdo + w0 * P, P, sv, P);  // dP (16, 64) = dO v^T
    __syncwarp();
    for (int t = threadIdx.x % 32; t < 16 * kTile; t += 32) {
      const int row = w0 + t / kTile, c = t % kTile;
      float p = 0, ds = 0;
      if (a.visible(mb, i0 + row, j0 + c)) {
        p = expf(ss[row * kPS + c] * a.scale - slse[row]);  // 0 when lse = +inf
        ds = p * (sdp[row * kPS + c] - sdelta[row]);
      }
      sp[row * kPP + c] = convert<T>(p);
      sds[row * kPP + c] = convert<T>(ds);
    }
    __syncwarp();
  }
};

// One block per (batch, tile of 64 keys): dk, dv (64, D) in registers, warp w owning keys 16w..16w+15.
template <class T, int D>
__global__ void __launch_bounds__(kFlashThreads)
    flash_dkdv_kernel(FlashArgs a, T* dk, T* dv, const float* lse, const float* delta, const T* q, const T* k,
                      const T* v, const T* go) {
  constexpr int P = pitch<T, D>();
  extern __shared__ __align__(128) unsigned char smem[];
  BackwardTiles<T, D> t(smem);
  const AttentionTile at = attention_tile(blockIdx.x, a.g.count, a.tiles, a.causal, AttentionTiles::Key);
  const int64_t b = at.batch, j0 = at.tile * kTile;
  const int w0 = threadIdx.x / 32 * 16;
  const T* qb = q + a.q.base(a.g, b);
  const T* gb = go + a.go.base(a.g, b);
  const bool* mb = a.mask_p ? a.mask_p + a.mask.base(a.g, b) : nullptr;
  load_tile<T, D>(t.sk, k + a.k.base(a.g, b), a.k, j0, a.S, a.E, a.vec_k);
  load_tile<T, D>(t.sv, v + a.v.base(a.g, b), a.v, j0, a.S, a.Ev, a.vec_v);
  Acc<T> dkf[D / 16], dvf[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) fill(dkf[n], 0.0f), fill(dvf[n], 0.0f);
  // causal: query tiles before j0 see none of these keys
  for (int64_t i0 = a.causal ? j0 : 0; i0 < a.L; i0 += kTile) {
    load_tile<T, D>(t.sq, qb, a.q, i0, a.L, a.E, a.vec_q);
    load_tile<T, D>(t.sdo, gb, a.go, i0, a.L, a.Ev, a.vec_go);
    t.load_row_stats(a, b, i0, lse, delta);
    __syncthreads();
    t.probs_and_dscores(a, mb, i0, j0, w0);
    __syncthreads();                                               // the warp's keys need P and dS of every query row
    mma_ab<T, D, wmma::col_major>(dvf, t.sp + w0, kPP, t.sdo, P);  // dv (16, D) += P^T (16, 64) @ dO (64, D)
    mma_ab<T, D, wmma::col_major>(dkf, t.sds + w0, kPP, t.sq, P);  // dk (16, D) += dS^T (16, 64) @ q (64, D)
    __syncthreads();                                               // the tiles are rewritten by the next query tile
  }
  float* stage = t.stage + threadIdx.x / 32 * 256;
  if (dv) store_rows<T, D>(dv + a.dv.base(a.g, b), a.dv.rs, dvf, stage, j0 + w0, a.S, a.Ev, 1.0f);
  if (dk) store_rows<T, D>(dk + a.dk.base(a.g, b), a.dk.rs, dkf, stage, j0 + w0, a.S, a.E, a.scale);
}

// One block per (batch, tile of 64 query rows): dq (64, D) in registers, warp w owning rows 16w..16w+15.
template <class T, int D>
__global__ void __launch_bounds__(kFlashThreads)
    flash_dq_kernel(FlashArgs a, T* dq, const float* lse, const float* delta, const T* q, const T* k, const T* v,
                    const T* go) {
  constexpr int P = pitch<T, D>();
  extern __shared__ __align__(128) unsigned char smem[];
  BackwardTiles<T, D> t(smem);
  const AttentionTile at = attention_tile(blockIdx.x, a.g.count, a.tiles, a.causal, AttentionTiles::Query);
  const int64_t b = at.batch, i0 = at.tile * kTile;
  const int w0 = threadIdx.x / 32 * 16;
  const T* kb = k + a.k.base(a.g, b);
  const T* vb = v + a.v.base(a.g, b);
  const bool* mb = a.mask_p ? a.mask_p + a.mask.base(a.g, b) : nullptr;
  load_tile<T, D>(t.sq, q + a.q.base(a.g, b), a.q, i0, a.L, a.E, a.vec_q);
  load_tile<T, D>(t.sdo, go + a.go.base(a.g, b), a.go, i0, a.L, a.Ev, a.vec_go);
  t.load_row_stats(a, b, i0, lse, delta);
  Acc<T> dqf[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) fill(dqf[n], 0.0f);
  const int64_t kend = a.causal ? min(a.S, i0 + kTile) : a.S;
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    load_tile<T, D>(t.sk, kb, a.k, j0, a.S, a.E, a.vec_k);
    load_tile<T, D>(t.sv, vb, a.v, j0, a.S, a.Ev, a.vec_v);
    __syncthreads();
    t.probs_and_dscores(a, mb, i0, j0, w0);
    mma_ab<T, D>(dqf, t.sds + w0 * kPP, kPP, t.sk, P);  // dq (16, D) += dS (16, 64) @ k (64, D)
    __syncthreads();                                    // k and v are rewritten by the next key tile
  }
  store_rows<T, D>(dq + a.dq.base(a.g, b), a.dq.rs, dqf, t.stage + threadIdx.x / 32 * 256, i0 + w0, a.L, a.E, a.scale);
}

// ---- host side -------------------------------------------------------------------------------------

// t can be read in 16-byte chunks (8 f16/bf16 or 4 f32 elements): unit column stride, every other
// stride and the data pointer aligned to a chunk, cols a multiple of one.
bool vectorizable(const Tensor& t) {
  if (!t.defined()) return false;
  const int64_t v = 16 / int64_t(dtype_size(t.dtype()));
  if (t.stride(-1) != 1 || t.size(-1) % v != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.stride(d) % v != 0) return false;
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
}

FlashArgs flash_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const Tensor& go, bool causal, double scale) {
  FlashArgs a;
  a.g = batch_of(op, q);
  a.L = q.size(-2), a.S = k.size(-2), a.E = q.size(-1), a.Ev = v.size(-1);
  a.tiles = 0;
  a.q = operand(q), a.k = operand(k), a.v = operand(v), a.mask = operand(mask), a.go = operand(go);
  a.vec_q = vectorizable(q), a.vec_k = vectorizable(k), a.vec_v = vectorizable(v), a.vec_go = vectorizable(go);
  a.mask_p = mask.defined() ? ptr<const bool>(mask) : nullptr;
  a.causal = causal;
  a.scale = float(scale);
  return a;
}

// Lets `kernel` take `smem` bytes of dynamic shared memory on the current device. The attribute
// is set once per kernel and device: setting it is a driver call, not free at every launch.
void allow_shared_memory(const char* op, const void* kernel, size_t smem) {
  static std::mutex mutex;
  static std::set<std::tuple<const void*, int, size_t>> done;
  int device = 0;
  CUDA_CHECK(op, cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count({kernel, device, smem})) return;
  CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  done.insert({kernel, device, smem});
}

// Launches kernel on (batch x tiles) blocks of kFlashThreads with `smem` bytes of shared memory.
template <class... Params, class... Args>
void launch(const char* op, void (*kernel)(Params...), FlashArgs& a, int64_t tiles, size_t smem, Args... args) {
  a.tiles = tiles;
  const int64_t blocks = a.g.count * tiles;
  if (blocks == 0) return;
  MDL_CHECK(blocks < (int64_t(1) << 31), op, ": ", blocks, " tiles are more than one CUDA grid holds");
  allow_shared_memory(op, reinterpret_cast<const void*>(kernel), smem);
  kernel<<<unsigned(blocks), kFlashThreads, smem, stream()>>>(a, args...);
  CUDA_CHECK_LAUNCH(op);
}

int64_t tiles_of(int64_t n) { return (n + kTile - 1) / kTile; }

// Calls f.template operator()<T, D>() for q's dtype and the padded head dim.
template <class F>
void dispatch_flash(const Tensor& q, const Tensor& v, F&& f) {
  const bool wide = std::max(q.size(-1), v.size(-1)) > 64;
  if (q.dtype() == kF16) wide ? f.template operator()<__half, 128>() : f.template operator()<__half, 64>();
  else if (q.dtype() == kBF16)
    wide ? f.template operator()<__nv_bfloat16, 128>() : f.template operator()<__nv_bfloat16, 64>();
  else wide ? f.template operator()<float, 128>() : f.template operator()<float, 64>();
}

// The forward kernel's shared memory: q, k, v tiles and P in T; scores, O, m and l in f32.
template <class T, int D>
constexpr size_t forward_smem() {
  return (3 * size_t(kTile) * pitch<T, D>() + size_t(kTile) * kPP) * sizeof(T) +
         size_t(kTile) * (kPS + D + 4 + 2) * sizeof(float);
}

// The most dynamic shared memory a block may opt in to on CUDA device `index` (227 KiB on an
// H100, 163 KiB on an A100), read once per device.
size_t max_block_smem(int index) {
  static std::atomic<int> cached[64];
  if (index < 0 || index >= 64) return 48 * 1024;
  int bytes = cached[index].load(std::memory_order_relaxed);
  if (bytes == 0) {
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, index) != cudaSuccess) {
      (void)cudaGetLastError();
      bytes = 48 * 1024;
    }
    cached[index].store(bytes, std::memory_order_relaxed);
  }
  return size_t(bytes);
}

}  // namespace

bool flash_attention_applies(const Tensor& q, const Tensor& v) {
  if (!toggles::flash_attention() || !(q.dtype() == kF16 || q.dtype() == kBF16 || q.dtype() == kF32) ||
      q.size(-1) > kFlashMaxHeadDim || v.size(-1) > kFlashMaxHeadDim)
    return false;
  size_t need = 0;  // f32 at head dim 128 needs 207 KiB, more than an A100's block may have
  dispatch_flash(q, v, [&]<class T, int D>() {
    need = std::max({forward_smem<T, D>(), forward_mma_smem<T, D>(), BackwardTiles<T, D>::bytes(),
                     mma_backward::smem_bytes<T, D>()});
    if constexpr (std::is_same_v<T, float>)  // less than the FMA kernels need: the switch moves no shape off flash
      need = std::max({need, forward_tf32_smem<D>(), tf32_backward::smem_bytes<D>()});
  });
  return need <= max_block_smem(q.device().index);
}

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& mask, bool causal, double scale) {
  const char* op = "scaled_dot_product_attention";
  FlashArgs a = flash_args(op, q, k, v, mask, Tensor(), causal, scale);
  a.o = output(op, out);
  dispatch_flash(q, v, [&]<class T, int D>() {
    if constexpr (std::is_same_v<T, float>) {
      if (toggles::flash_attention_tf32x3()) {
        launch(op, flash_forward_tf32_kernel<D>, a, tiles_of(a.L), forward_tf32_smem<D>(), ptr<float>(out),
               ptr<float>(lse), ptr<const float>(q), ptr<const float>(k), ptr<const float>(v));
        return;
      }
    } else {
      if (toggles::flash_attention_mma()) {
        launch(op, flash_forward_mma_kernel<T, D>, a, tiles_of(a.L), forward_mma_smem<T, D>(), ptr<T>(out),
               ptr<float>(lse), ptr<const T>(q), ptr<const T>(k), ptr<const T>(v));
        return;
      }
    }
    launch(op, flash_forward_kernel<T, D>, a, tiles_of(a.L), forward_smem<T, D>(), ptr<T>(out), ptr<float>(lse),
           ptr<const T>(q), ptr<const T>(k), ptr<const T>(v));
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& mask, bool causal, double scale) {
  const char* op = "scaled_dot_product_attention_backward";
  FlashArgs a = flash_args(op, q, k, v, mask, grad_out, causal, scale);
  a.o = operand(out), a.dq = output(op, dq), a.dk = output(op, dk), a.dv = output(op, dv);
  const int64_t rows = a.g.count * a.L;
  Tensor delta = make_tensor({rows}, kF32, q.device());
  dispatch_flash(q, v, [&]<class T, int D>() {
    if (rows > 0) {
      flash_delta_kernel<T><<<unsigned((rows + kWarps - 1) / kWarps), kFlashThreads, 0, stream()>>>(
          a, ptr<float>(delta), ptr<const T>(grad_out), ptr<const T>(out));
      CUDA_CHECK_LAUNCH(op);
    }
    if constexpr (std::is_same_v<T, float>) {
      if (toggles::flash_attention_tf32x3()) {
        constexpr size_t smem = tf32_backward::smem_bytes<D>();
        if (dq.defined())
          launch(op, tf32_backward::dq_kernel<D>, a, tiles_of(a.L), smem, ptr<float>(dq), ptr<const float>(lse),
                 ptr<const float>(delta), ptr<const float>(q), ptr<const float>(k), ptr<const float>(v),
                 ptr<const float>(grad_out));
        if (dk.defined() || dv.defined())
          launch(op, tf32_backward::dkdv_kernel<D>, a, tiles_of(a.S), smem, dk.defined() ? ptr<float>(dk) : nullptr,
                 dv.defined() ? ptr<float>(dv) : nullptr, ptr<const float>(lse), ptr<const float>(delta),
                 ptr<const float>(q), ptr<const float>(k), ptr<const float>(v), ptr<const float>(grad_out));
        return;
      }
    } else {
      if (toggles::flash_attention_mma()) {
        constexpr size_t smem = mma_backward::smem_bytes<T, D>();
        if (dq.defined())
          launch(op, mma_backward::dq_kernel<T, D>, a, tiles_of(a.L), smem, ptr<T>(dq), ptr<const float>(lse),
                 ptr<const float>(delta), ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const T>(grad_out));
        if (dk.defined() || dv.defined())
          launch(op, mma_backward::dkdv_kernel<T, D>, a, tiles_of(a.S), smem, dk.defined() ? ptr<T>(dk) : nullptr,
                 dv.defined() ? ptr<T>(dv) : nullptr, ptr<const float>(lse), ptr<const float>(delta), ptr<const T>(q),
                 ptr<const T>(k), ptr<const T>(v), ptr<const T>(grad_out));
        return;
      }
    }
    constexpr size_t smem = BackwardTiles<T, D>::bytes();
    if (dq.defined())
      launch(op, flash_dq_kernel<T, D>, a, tiles_of(a.L), smem, ptr<T>(dq), ptr<const float>(lse),
             ptr<const float>(delta), ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const T>(grad_out));
    if (dk.defined() || dv.defined())
      launch(op, flash_dkdv_kernel<T, D>, a, tiles_of(a.S), smem, dk.defined() ? ptr<T>(dk) : nullptr,
             dv.defined() ? ptr<T>(dv) : nullptr, ptr<const float>(lse), ptr<const float>(delta), ptr<const T>(q),
             ptr<const T>(k), ptr<const T>(v), ptr<const T>(grad_out));
  });
}

}  // namespace mdl::cuda
