// roofline_png: the session's kernel_roofline() rows as points, their limits as roofs, through
// roofline_chart (tools/mdl_train/plot.h).
#include "tools/mdl_train/roofline_plot.h"

#include <algorithm>
#include <cstdio>

#include "tensor/error.h"
#include "tools/mdl_train/plot.h"

namespace mdl::train {

namespace {

std::string rate(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 100 ? "%.1f" : "%.0f", v);
  return buf;
}

}  // namespace

void roofline_png(const std::string& path, const profiler::Session& session,
                  const profiler::RooflineOptions& roofline) {
  MDL_CHECK(roofline.ceilings, "roofline chart '", path, "': no ceilings to draw (mdl-roofline measures them)");
  std::vector<profiler::KernelRoofline> kernels = session.kernel_roofline(roofline);
  const bool gpu = std::any_of(kernels.begin(), kernels.end(),
                               [](const profiler::KernelRoofline& k) { return k.device.is_cuda(); });
  std::erase_if(kernels, [&](const profiler::KernelRoofline& k) { return k.device.is_cuda() != gpu; });
  const double session_ns = double(std::max<int64_t>(session.duration_ns(), 1));
  std::vector<RooflinePoint> points;
  std::vector<Roof> roofs;
  int unplaced = 0;
  double unplaced_ns = 0;
  for (const profiler::KernelRoofline& k : kernels) {
    const profiler::RoofSum& s = k.sum;
    const profiler::Limit& l = *s.limit;
    const std::string roof_name = l.memory + " " + rate(l.bandwidth_gbs) + " GB/s, " + l.compute + " " +
                                  rate(l.peak_gflops) + " GFLOP/s";
    if (std::none_of(roofs.begin(), roofs.end(), [&](const Roof& r) { return r.name == roof_name; }))
      roofs.push_back({roof_name, l.peak_gflops, l.bandwidth_gbs});
    if (s.flops_known && s.flops > 0 && s.bytes > 0 && s.time_ns > 0)
      points.push_back({k.name, s.intensity(), s.achieved_gflops(), std::min(1.0, double(s.time_ns) / session_ns)});
    else ++unplaced, unplaced_ns += double(s.time_ns);
  }
  const profiler::CpuCeilings& cpu = roofline.ceilings->cpu;
  if (roofs.empty()) {
    const std::optional<profiler::Limit> l = profiler::limit_for(roofline, gpu ? Device::cuda() : Device::cpu(), kF32);
    MDL_CHECK(l, "roofline chart '", path, "': the ceilings hold nothing for ", gpu ? "the GPU" : "the CPU");
    roofs.push_back(
        {l->memory + " " + rate(l->bandwidth_gbs) + " GB/s, " + l->compute + " " + rate(l->peak_gflops) + " GFLOP/s",
         l->peak_gflops, l->bandwidth_gbs});
  }
  if (!gpu && cpu.l2_gbs > 0)
    roofs.push_back({"L2 triad " + rate(cpu.l2_gbs) + " GB/s", roofs[0].peak_gflops, cpu.l2_gbs});
  const std::string device = gpu ? roofline.ceilings->gpu.device
                                 : cpu.model + ", " + std::to_string(cpu.threads) + " threads";
  std::string x_label = "arithmetic intensity (FLOP/byte)";
  if (unplaced)
    x_label += "; " + std::to_string(unplaced) + " kernels without a FLOP count (" +
               rate(100.0 * unplaced_ns / session_ns) + "% of the time) not shown";
  roofline_chart(path, roofs, points,
                 {.title = "Roofline: " + std::to_string(points.size()) + " kernels on " + device,
                  .x_label = x_label,
                  .y_label = "GFLOP/s (disc area: share of the profiled time)",
                  .width = 1100,
                  .height = 650});
}

}  // namespace mdl::train
