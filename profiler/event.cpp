// Printing what a session recorded: kind names and shape records.
#include "profiler/event.h"

namespace mdl::profiler {

const char* kind_name(EventKind k) {
  switch (k) {
    case EventKind::Kernel: return "kernel";
    case EventKind::Backward: return "backward";
    case EventKind::Module: return "module";
    case EventKind::Phase: return "phase";
    case EventKind::Scope: return "scope";
    case EventKind::DeviceKernel: return "device_kernel";
  }
  return "?";
}

std::string shape_record_str(const ShapeRecord& s) {
  std::string out = std::string(dtype_name(s.dtype)) + "[";
  for (int d = 0; d < s.ndim; ++d) {
    if (d) out += ", ";
    if (d == ShapeRecord::kMaxDims) {
      out += "...";
      break;
    }
    out += std::to_string(s.dims[d]);
  }
  return out + "]";
}

std::string Event::shapes_str() const {
  std::string out;
  for (int i = 0; i < n_shapes; ++i) out += (i ? ", " : "") + shape_record_str(shapes[i]);
  return out;
}

}  // namespace mdl::profiler
