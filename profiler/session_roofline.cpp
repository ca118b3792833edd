// Session's roofline view: which events are held to a limit, and the kernels summed against theirs.
#include <algorithm>
#include <map>

#include "profiler/session.h"

namespace mdl::profiler {

std::optional<Limit> Session::roofline_limit(size_t i, const RooflineOptions& roofline, int64_t* time_ns) const {
  require_stopped("roofline_limit()");
  const Event& e = events_.at(i);
  const bool cpu_kernel = e.kind == EventKind::Kernel && e.device.is_cpu();
  if (!cpu_kernel && e.kind != EventKind::DeviceKernel) return std::nullopt;
  if (e.flops < 0 && e.bytes == 0) return std::nullopt;  // no tensor arguments seen: nothing to bound
  std::optional<Limit> limit = limit_for(roofline, e.device, e.dtype, is_conv_kernel(e.name));
  // A CPU kernel's own time: the kernels it calls (a copy to contiguous) are held to their own limits.
  if (limit && time_ns) *time_ns = cpu_kernel ? self_ns_[i] : e.dur_ns();
  return limit;
}

std::vector<KernelRoofline> Session::kernel_roofline(const RooflineOptions& roofline) const {
  require_stopped("kernel_roofline()");
  std::map<std::pair<std::string, std::string>, KernelRoofline> by_kernel;
  for (size_t i = 0; i < events_.size(); ++i) {
    int64_t time_ns = 0;
    const std::optional<Limit> limit = roofline_limit(i, roofline, &time_ns);
    if (!limit) continue;
    const Event& e = events_[i];
    KernelRoofline& k = by_kernel[{e.name, e.device.str()}];
    if (k.sum.calls == 0) k.name = e.name, k.device = e.device;
    k.sum.add(e.flops, e.bytes, time_ns, *limit);
  }
  std::vector<KernelRoofline> out;
  for (auto& [key, k] : by_kernel) out.push_back(std::move(k));
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelRoofline& a, const KernelRoofline& b) { return a.sum.time_ns > b.sum.time_ns; });
  return out;
}

}  // namespace mdl::profiler
