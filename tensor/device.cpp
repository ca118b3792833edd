// Device names and the device probe: the one place that asks whether CUDA was built in.
#include "tensor/device.h"

#include "tensor/error.h"

#ifdef MDL_WITH_CUDA
namespace mdl::cuda::detail {
int runtime_device_count();  // cuda/runtime/runtime.cpp
void register_kernels();     // cuda/register.cu
}  // namespace mdl::cuda::detail
#endif

namespace mdl {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device::cuda(std::stoi(s.substr(5)));
  MDL_FAIL("parse_device: '", s, "' is not a device (expected cpu, cuda or cuda:N)");
}

namespace cuda {
#ifdef MDL_WITH_CUDA
bool compiled() { return true; }
int device_count() {
  static const int n = [] {
    int count = detail::runtime_device_count();
    if (count > 0) detail::register_kernels();
    return count;
  }();
  return n;
}
#else
bool compiled() { return false; }
int device_count() { return 0; }
#endif
bool is_available() { return device_count() > 0; }
}  // namespace cuda

}  // namespace mdl
