// The CUDA runtime probe: how many GPUs this process can see (0 when the driver or a GPU is missing).
#include <cuda_runtime.h>

namespace mdl::cuda::detail {

int runtime_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error: no GPU is not a failure
    return 0;
  }
  return n;
}

}  // namespace mdl::cuda::detail
