// check_same_model compares one fingerprint per state entry through all_reduces of their maximum
// and negated maximum (equal on every rank exactly when the ranks agree), then broadcasts the
// texts of the first differing entry so every rank throws the same message.
#include "dist/replica_state.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/native/factory.h"
#include "tensor/error.h"

namespace mdl::dist {
namespace {

constexpr int64_t kTextBytes = 256;

std::string describe(const std::string& name, const Tensor& t) {
  return detail::concat("'", name, "' ", shape_str(t.shape()), " ", dtype_name(t.dtype()),
                        t.requires_grad() ? " (requires_grad)" : "");
}

// Positive and nonzero (0 marks "no such entry"), small enough to negate.
int64_t fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return int64_t(h >> 2) | 1;
}

Device device_of(const ProcessGroup& group) { return group.backend() == "nccl" ? Device::cuda() : Device::cpu(); }

// Max over the ranks of each value and of its negation: {max, min} per value.
std::vector<std::pair<int64_t, int64_t>> max_and_min(ProcessGroup& group, const std::vector<int64_t>& values) {
  std::vector<int64_t> both;
  for (int64_t v : values) both.insert(both.end(), {v, -v});
  const Tensor t = from_vector(both, {int64_t(both.size())}).to(device_of(group));
  group.all_reduce(t, ReduceOp::Max);
  const std::vector<int64_t> r = t.cpu().to_vector<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back({r[2 * i], -r[2 * i + 1]});
  return out;
}

// root's text (cut to kTextBytes) on every rank.
std::string broadcast_text(ProcessGroup& group, const std::string& text, int root) {
  Tensor bytes = zeros({kTextBytes}, kU8);
  if (group.rank() == root) std::memcpy(bytes.raw_data(), text.data(), std::min<size_t>(text.size(), kTextBytes - 1));
  const Tensor on_device = bytes.to(device_of(group));
  group.broadcast(on_device, root);
  bytes = on_device.cpu();
  return std::string(static_cast<const char*>(bytes.raw_data()));
}

}  // namespace

void check_same_model(const nn::Module& module, ProcessGroup& group) {
  if (group.world_size() == 1) return;
  std::vector<std::string> entries;
  for (const auto& [name, t] : module.state_dict()) entries.push_back(describe(name, t));
  const int64_t count = int64_t(entries.size());
  const auto [max_count, min_count] = max_and_min(group, {count})[0];
  std::vector<int64_t> prints(size_t(max_count), 0);
  for (int64_t i = 0; i < count; ++i) prints[size_t(i)] = fingerprint(entries[size_t(i)]);
  const auto agreed = max_and_min(group, prints);
  const auto differs = std::find_if(agreed.begin(), agreed.end(), [](const auto& mm) { return mm.first != mm.second; });
  if (differs == agreed.end()) return;
  const int64_t first = int64_t(differs - agreed.begin());
  const std::string mine = first < count ? entries[size_t(first)]
                                         : detail::concat("nothing (", count, " entries in all)");
  const std::string at_root = broadcast_text(group, mine, 0);
  const std::string my_print = std::to_string(fingerprint(mine));
  const bool same_as_root = broadcast_text(group, my_print, 0) == my_print;
  const int other = int(max_and_min(group, {same_as_root ? -1 : int64_t(group.rank())})[0].first);
  const std::string at_other = broadcast_text(group, mine, other);
  const std::string counts = max_count == min_count
                                 ? ""
                                 : detail::concat(" (the ranks hold ", min_count, " to ", max_count, " state entries)");
  MDL_FAIL("DistributedDataParallel: the ranks built different models: state entry ", first, " is ", at_root,
           " on rank 0 but ", at_other, " on rank ", other, counts, "; every rank must build the same model");
}

void broadcast_any_layout(ProcessGroup& group, const Tensor& t, int root) {
  if (t.is_contiguous()) return group.broadcast(t, root);
  const Tensor packed = t.contiguous();
  group.broadcast(packed, root);
  Tensor(t).copy_(packed);
}

}  // namespace mdl::dist
