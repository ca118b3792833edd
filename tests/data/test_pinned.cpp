// pin_memory: with a GPU, every batch a loader hands out lives in page-locked memory and the
// statistics say so; without one the case is reported skipped (the CPU path is covered by the
// loader tests, which compare pinned and unpinned epochs).
#include <doctest/doctest.h>

#include "cuda/api.h"
#include "data/image_folder.h"
#include "data/pinned.h"
#include "tests/support/data_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;

TEST_CASE("cuda: pin_memory puts every batch in page-locked memory" * MDL_CUDA_ONLY) {
  data_test::TempDir dir("pinned");
  data_test::make_image_folder(dir.path, 1, 7, 2, 2, 1);
  data::ImageFolder images(dir.path.string());
  CHECK(data::pinned_memory_available());
  data::DataLoader loader(images, {.batch_size = 3, .num_workers = 1, .pin_memory = true});
  int batches = 0;
  for (auto& [x, y] : loader) {
    CHECK(cuda::is_pinned(x));
    CHECK(cuda::is_pinned(y));
    ++batches;
  }
  CHECK(batches == 3);
  CHECK(loader.stats().pinned);
}
