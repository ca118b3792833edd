// The CUDA context's block counters (cuda/runtime/context.cuh), on which batch norm's statistics
// passes and layer norm's parameter sums count their blocks done without a memset first: every
// counter is back at zero after each pass, NCHW and channels-last, batch_norm_packed_stats off and
// on. Built in CUDA builds only (it reads the counters through the toolkit's API); skipped without
// a GPU.
#ifdef MDL_WITH_CUDA
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cuda/runtime/context.cuh"
#include "mdl.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "tests/support/test_util.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

// How many of the context's counters are not zero once the stream has drained.
int64_t nonzero_block_counters() {
  cuda::synchronize();
  std::vector<unsigned> host(size_t(cuda::detail::kBlockCounters));
  REQUIRE(cudaMemcpy(host.data(), cuda::detail::block_counters(), host.size() * sizeof(unsigned),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  int64_t n = 0;
  for (unsigned v : host) n += v != 0;
  return n;
}

}  // namespace

TEST_CASE("cuda: batch norm and layer norm leave the context's block counters at zero" * MDL_CUDA_ONLY) {
  const Device gpu = Device::cuda();
  for (bool packed : {false, true}) {
    toggles::Scoped flip(toggles::Toggle::batch_norm_packed_stats, packed);
    for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
      // Many pieces per channel, odd sizes (the scalar passes), vectors of 3 channels.
      for (const Shape& s : {Shape{32, 64, 16, 16}, Shape{4, 6, 5, 7}, Shape{8, 24, 8, 8}}) {
        const TensorOptions f16(kF16, gpu);
        Tensor x = randn(s, f16).contiguous(format).requires_grad_();
        Tensor w = ones({s[1]}, gpu).requires_grad_(), b = zeros({s[1]}, gpu).requires_grad_();
        Tensor rm = zeros({s[1]}, gpu), rv = ones({s[1]}, gpu);
        F::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5).backward(randn(s, f16).contiguous(format));
        CHECK_MESSAGE(nonzero_block_counters() == 0, "batch_norm ", shape_str(s),
                      format == MemoryFormat::ChannelsLast ? " channels-last" : "", packed ? " packed" : "");
      }
  }
  Tensor x = randn({64, 384}, gpu).requires_grad_();
  Tensor w = ones({384}, gpu).requires_grad_(), b = zeros({384}, gpu).requires_grad_();
  F::layer_norm(x, {384}, w, b).backward(randn({64, 384}, gpu));
  CHECK_MESSAGE(nonzero_block_counters() == 0, "layer_norm's parameter sums");
}
#endif
