// Device: where a tensor's bytes live (the CPU, or CUDA device N), and the device probe.
#pragma once
#include <ostream>
#include <string>

namespace mdl {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};
inline std::ostream& operator<<(std::ostream& s, const Device& d) { return s << d.str(); }
Device parse_device(const std::string& s);  // "cpu", "cuda", "cuda:1"; throws on anything else

namespace cuda {
bool compiled();      // built with the CUDA backend
int device_count();   // 0 when not compiled or no GPU is present
bool is_available();  // device_count() > 0
}  // namespace cuda

}  // namespace mdl
