// dump_epoch_orders: epochs 0 .. epochs-1 back to back; a write error names the file.
#include "tools/mdl_train/order_dump.h"

#include <cstdio>
#include <vector>

#include "tensor/error.h"

namespace mdl::train {

void dump_epoch_orders(const std::string& path, const data::DataLoader& loader, int64_t epochs) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  MDL_CHECK(f, "cannot write --dump-order file '", path, "'");
  bool ok = true;
  for (int64_t e = 0; e < epochs; ++e) {
    const std::vector<int64_t> order = loader.epoch_order(e);
    ok &= std::fwrite(order.data(), sizeof(int64_t), order.size(), f) == order.size();
  }
  ok &= std::fclose(f) == 0;
  MDL_CHECK(ok, "writing --dump-order file '", path, "' failed");
}

}  // namespace mdl::train
