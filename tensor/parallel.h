// parallel_for over an index range on the CPU's threads (OpenMP), with a grain below which
// the work stays on the calling thread. Static chunks, so results are deterministic for a
// given thread count. parallel_claims and parallel_for_balanced start from the same static shares
// but let a thread done early take a slower one's last items, for work whose every item's result is
// its own. An exception thrown by f in any chunk reaches the caller. Every thread that runs f has
// the flush_denormal setting applied (tensor/float_mode.h). OpenMP because it costs no code of ours,
// is portable across g++ and nvcc's host compiler, and its static schedule makes chunking
// predictable.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "switches/list/toggles.h"
#include "tensor/float_mode.h"

namespace mdl {

inline constexpr int64_t kGrainSize = 32768;  // elements of simple work per thread, at least

int get_num_threads();
void set_num_threads(int n);
bool in_parallel_region();
int thread_index();  // this thread's number inside a parallel_for (0 outside one)

#ifdef _OPENMP
namespace detail {
// Runs body() on `threads` OpenMP threads, each with the flush_denormal setting applied. An exception
// may not leave an OpenMP region: on_error() runs on the thread that threw, and the first exception
// is rethrown here once every thread has finished.
template <class Body, class OnError>
void on_threads(int threads, const Body& body, const OnError& on_error) {
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    sync_float_mode();
    try {
      body();
    } catch (...) {
      on_error();
#pragma omp critical(mdl_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}
}  // namespace detail
#endif

// Calls f(begin, end) on disjoint chunks covering [begin, end).
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  sync_float_mode();
#ifdef _OPENMP
  int threads = int(std::min<int64_t>(get_num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1)));
  if (threads > 1 && !omp_in_parallel()) {
    detail::on_threads(
        threads,
        [&] {
          const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads(), chunk = (n + nt - 1) / nt;
          const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
          if (b < e) f(b, e);
        },
        [] {});
    return;
  }
#endif
  f(begin, end);
}

// The items of [begin, end) handed out one at a time: each of `parts` threads first takes the items
// of its own share (parallel_for's static split) from the front, in order, then takes the last item
// left in another's share, so a thread that finishes early helps a slower one and otherwise each
// walks its own contiguous run.
class Claims {
 public:
  // steal: whether a thread done with its own share takes from another's (the balanced_threads switch);
  // without, each thread runs exactly its static share.
  Claims(int64_t begin, int64_t end, int parts, bool steal = true)
      : shares_(size_t(std::max(parts, 1))), steal_(steal) {
    const int64_t n = end - begin, p = int64_t(shares_.size());
    for (int64_t t = 0; t < p; ++t) {
      shares_[size_t(t)].front = begin + n * t / p;
      shares_[size_t(t)].back = begin + n * (t + 1) / p;
    }
  }
  // The calling thread's next item in i, or false when none is left anywhere.
  bool next(int64_t& i) {
    const size_t p = shares_.size(), own = size_t(thread_index()) % p;
    {
      Share& s = shares_[own];
      std::lock_guard<std::mutex> lock(s.m);
      if (s.front < s.back) return i = s.front++, true;
    }
    for (size_t k = 1; k < p && steal_; ++k) {
      Share& s = shares_[(own + k) % p];
      std::lock_guard<std::mutex> lock(s.m);
      if (s.front < s.back) return i = --s.back, true;
    }
    return false;
  }
  // No item is handed out after this (a thread failed).
  void stop() {
    for (Share& s : shares_) {
      std::lock_guard<std::mutex> lock(s.m);
      s.front = s.back;
    }
  }

 private:
  struct alignas(64) Share {
    std::mutex m;
    int64_t front = 0, back = 0;
  };
  std::vector<Share> shares_;
  bool steal_;
};

// Runs f(claims) once on each thread (as many as there are grains of items, as parallel_for), every
// thread taking items from claims until none is left: for tasks of unequal or unpredictable length
// (a core slowed by another tenant), where parallel_for's static split leaves threads waiting on
// the slowest. f keeps its scratch across its items. Each item's result must not depend on which
// thread computes it.
template <class F>
void parallel_claims(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
  sync_float_mode();
#ifdef _OPENMP
  const int threads = int(
      std::min<int64_t>(get_num_threads(), (end - begin + grain - 1) / std::max<int64_t>(grain, 1)));
  if (threads > 1 && !omp_in_parallel()) {
    Claims claims(begin, end, threads, toggles::balanced_threads());
    detail::on_threads(
        threads, [&] { f(claims); }, [&] { claims.stop(); });
    return;
  }
#endif
  Claims claims(begin, end, 1);
  f(claims);
}

// parallel_for's f(begin, end) over pieces: each thread's static share of [begin, end) cut into
// kPiecesPerThread pieces of at least `grain` items, run in order, and a thread done with its own
// takes the last pieces of another's (Claims). With equal cores each thread walks what parallel_for
// would give it; with one slowed by another tenant the others take over its last pieces instead of
// waiting. For passes whose every item's result is its own (elementwise, per row), so that the
// pieces' bounds cannot show in any bit.
inline constexpr int64_t kPiecesPerThread = 8;

template <class F>
void parallel_for_balanced(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t pieces = std::min<int64_t>(int64_t(get_num_threads()) * kPiecesPerThread, (n + grain - 1) / grain);
  if (pieces <= 1 || !toggles::balanced_threads()) return parallel_for(begin, end, grain, f);
  parallel_claims(0, pieces, 1, [&](Claims& claims) {
    for (int64_t i; claims.next(i);) f(begin + n * i / pieces, begin + n * (i + 1) / pieces);
  });
}

}  // namespace mdl
