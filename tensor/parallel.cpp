// Thread-count control for parallel_for.
#include "tensor/parallel.h"

#include "tensor/error.h"

namespace mdl {

int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Sets OpenMP's own count, so parallel_for and the GEMM (which asks OpenMP) agree.
void set_num_threads(int n) {
  MDL_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got ", n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace mdl
