// Operands packed once on bf16 pairs (cpu/gemm.h's PackedA and PackedB packed for bf16 products), for
// the two files that compile the pair kernel (cpu/bf16_pairs_avx512bf16.cpp, cpu/bf16_pairs_avx512.cpp),
// after cpu/gemm_bf16_dot_impl.h. As the f32 layout (cpu/gemm.cpp), a packed operand is every KC
// step's block at once: the pairs of k in [pc, pc + kb) (kb = min(KC, K - pc)) start at pc / 2 * Mpad
// (A, as ceil(kb / 2) x MR panels) or pc / 2 * Npad (B, ceil(kb / 2) x NR panels), Mpad and Npad
// M and N rounded up to the tile. The KC steps are gemm_serial's, so each element of C is the sum
// gemm_serial gives for the same operands. An odd prefix k of a longer packed k ends inside a pair:
// its last pair step takes the high halves as zero (kernel_12x32's kLowLast).
#pragma once

namespace mdl::cpu::bf16_dot {

constexpr int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// S: float (rounded to bf16 as it is packed) or uint16_t (bf16 bits, taken as they are), as pack_a.
template <class Dot, class S>
void pack_a_whole(int64_t M, int64_t K, const S* A, int64_t rsa, int64_t csa, uint32_t* buf) {
  const int64_t mpad = round_up(M, MR);
  for (int64_t pc = 0; pc < K; pc += KC)
    pack_a<Dot>(M, std::min(KC, K - pc), A + pc * csa, rsa, csa, buf + pc / 2 * mpad);
}

template <class Dot>
void pack_b_whole(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, uint32_t* buf) {
  const int64_t npad = round_up(N, NR);
  for (int64_t pc = 0; pc < K; pc += KC) {
    const int64_t kb = std::min(KC, K - pc), kbp = (kb + 1) / 2;
    for (int64_t jr = 0; jr < N; jr += NR)
      pack_b_panel<Dot>(kb, std::min(NR, N - jr), B + pc * rsb + jr * csb, rsb, csb, buf + pc / 2 * npad + jr * kbp);
  }
}

// macro_kernel, with the last pair's high halves zero when the block's kc is odd and the packed
// operand's kb longer.
template <class Dot>
void macro_kernel_prefix(int64_t mc, int64_t nc, int64_t kc, int64_t kb, float alpha, const uint32_t* a,
                         int64_t a_panel, const uint32_t* b, int64_t b_panel, float beta, float* C, int64_t rsc,
                         int64_t csc) {
  const int64_t kp = (kc + 1) / 2;
  if (kc % 2 == 1 && kc < kb)
    return macro_kernel<Dot, true>(mc, nc, kp, alpha, a, a_panel, b, b_panel, beta, C, rsc, csc);
  macro_kernel<Dot>(mc, nc, kp, alpha, a, a_panel, b, b_panel, beta, C, rsc, csc);
}

// C (m x n) = alpha * packed A (M x K)[:m, :k] @ panel (k x n, n <= NR, rows NR values apart) + beta * C;
// m, n, k > 0. Each KC step's rows of the panel (floats, or bf16 bits) are paired into scratch.
template <class Dot, class S>
void times_panel(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                 const S* panel, float beta, float* C, int64_t rsc, int64_t csc) {
  const int64_t mpad = round_up(M, MR);
  uint32_t* pairs = packing_scratch<uint32_t>(1, (std::min(KC, k) + 1) / 2 * NR);
  for (int64_t pc = 0; pc < k; pc += KC) {
    const int64_t kc = std::min(KC, k - pc), kb = std::min(KC, K - pc);
    pack_b_panel<Dot>(kc, NR, panel + pc * NR, NR, int64_t(1), pairs);
    macro_kernel_prefix<Dot>(m, n, kc, kb, alpha, packed + pc / 2 * mpad, (kb + 1) / 2 * MR, pairs, 0,
                             pc == 0 ? beta : 1.0f, C, rsc, csc);
  }
}

// C (M x n) = alpha * A (M x k) @ packed B (K x N)[:k, :n] + beta * C; M, n, k > 0. A (floats, or bf16
// bits) is paired as it is read.
template <class Dot, class S>
void times_b(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha, const S* A,
             int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc) {
  const int64_t npad = round_up(N, NR);
  uint32_t* abuf = packing_scratch<uint32_t>(0, (std::min(KC, k) + 1) / 2 * std::min(MC, round_up(M, MR)));
  for (int64_t pc = 0; pc < k; pc += KC) {
    const int64_t kc = std::min(KC, k - pc), kb = std::min(KC, K - pc);
    for (int64_t ic = 0; ic < M; ic += MC) {
      const int64_t mc = std::min(MC, M - ic);
      pack_a<Dot>(mc, kc, A + ic * rsa + pc * csa, rsa, csa, abuf);
      macro_kernel_prefix<Dot>(mc, n, kc, kb, alpha, abuf, (kc + 1) / 2 * MR, packed + pc / 2 * npad, (kb + 1) / 2 * NR,
                               pc == 0 ? beta : 1.0f, C + ic * rsc, rsc, csc);
    }
  }
}

}  // namespace mdl::cpu::bf16_dot
