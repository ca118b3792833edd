/* An independent yardstick for mdl-roofline (tools/roofline_check.sh): a hand-written FMA loop and
 * a STREAM-style triad, compiled on their own with -march=native and OpenMP, sharing no code with
 * mdl. Prints "fma_gflops X" (the widest FMA this compiler targets, on every OpenMP thread) and
 * "triad_gbs Y" (a[i] = b[i] + s * c[i] over three arrays of ARRAY_BYTES each, STREAM's byte count:
 * two reads and a write per element). Usage: roofline_reference ARRAY_BYTES [fma|triad], with no
 * second argument both. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define CHAINS 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define STORE _mm512_storeu_ps
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define CHAINS 12
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define STORE _mm256_storeu_ps
#else
#error "roofline_reference needs AVX2 and FMA"
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float fma_loop(long rounds) {
  vec acc[CHAINS];
  const vec m = SET1(0.999999f), c = SET1(1e-6f);
  for (int i = 0; i < CHAINS; ++i) acc[i] = SET1((float)i);
  for (long r = 0; r < rounds; ++r)
    for (int i = 0; i < CHAINS; ++i) acc[i] = FMA(acc[i], m, c);
  float out[LANES], sum = 0;
  for (int i = 0; i < CHAINS; ++i) {
    STORE(out, acc[i]);
    sum += out[0];
  }
  return sum;
}

static volatile float sink;

static double fma_seconds(long rounds) {
  const double t0 = now();
#pragma omp parallel
  {
    const float v = fma_loop(rounds);
    if (v == -1.0f) sink = v;
  }
  return now() - t0;
}

/* The best of 10 tries of about 20 ms each: as many short windows as mdl-roofline takes, so that
 * where other programs share the cores both have the same chances of an undisturbed one. */
static double best_fma_gflops(int threads) {
  long rounds = 1L << 12;
  while (fma_seconds(rounds) < 0.02) rounds *= 2;
  double best = 0;
  for (int t = 0; t < 10; ++t) {
    const double rate = (double)threads * (double)rounds * CHAINS * LANES * 2 / fma_seconds(rounds) / 1e9;
    if (rate > best) best = rate;
  }
  return best;
}

/* The best of 20 single passes; -1 when the arrays cannot be allocated. */
static double best_triad_gbs(long array_bytes) {
  const long n = array_bytes / 4;
  float* a = aligned_alloc(64, (size_t)(n + 16) * 4);
  float* b = aligned_alloc(64, (size_t)(n + 16) * 4);
  float* c = aligned_alloc(64, (size_t)(n + 16) * 4);
  if (!a || !b || !c) return -1;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  double best = 0;
  for (int pass = 0; pass < 20; ++pass) {
    const float s = 0.5f;
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    const double rate = 12.0 * (double)n / (now() - t0) / 1e9;
    if (rate > best) best = rate;
  }
  if (a[n / 2] != 1.0f + 0.5f * 2.0f) best = -1;
  free(a), free(b), free(c);
  return best;
}

int main(int argc, char** argv) {
  const long array_bytes = argc > 1 ? atol(argv[1]) : 32L << 20;
  const char* what = argc > 2 ? argv[2] : "both";
  const int fma = !strcmp(what, "fma") || !strcmp(what, "both"), triad = !strcmp(what, "triad") || !strcmp(what, "both");
  if (array_bytes < 64 || (!fma && !triad)) {
    fprintf(stderr, "usage: roofline_reference ARRAY_BYTES [fma|triad]\n");
    return 2;
  }
  const int threads = omp_get_max_threads();
  printf("threads %d\n", threads);
  if (fma) printf("fma_gflops %.1f\n", best_fma_gflops(threads));
  if (triad) {
    const double gbs = best_triad_gbs(array_bytes);
    if (gbs < 0) return 1;
    printf("triad_gbs %.2f\n", gbs);
  }
  return 0;
}
