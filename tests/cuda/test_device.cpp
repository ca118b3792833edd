// The CUDA backend's side stream, allocator pools and profiler timer: the DataLoader's copy of
// each batch to the GPU on a side stream (batches equal the CPU ones, with and without workers
// and pinned memory; a clear error for the option without CUDA or a GPU), cuda::CopyStream
// reusing side-stream memory only after mdl's stream is done with it, per-device allocator
// statistics, and DeviceKernel events from CUDA events. CUDA cases are skipped without a GPU.
#include <doctest/doctest.h>

#include "data/loader.h"
#include "data/tensor_dataset.h"
#include "mdl.h"
#include "profiler/cuda_timer.h"
#include "profiler/session.h"
#include "cuda/api.h"
#include "tests/support/test_util.h"
#include "tests/support/profiler_test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

// 37 samples of (3, 4) f32 with i64 labels: batches of 8 leave a short last one.
data::TensorDataset numbered_dataset() {
  Tensor x = arange(37 * 12).to(kF32).reshape({37, 3, 4});
  Tensor y = arange(37).to(kI64);
  return data::TensorDataset(x, y);
}

std::vector<data::Batch> epoch(data::DataLoader& loader) {
  std::vector<data::Batch> out;
  for (auto& b : loader) out.push_back({b.x.cpu(), b.y.cpu()});
  return out;
}

}  // namespace

TEST_CASE("data: DataLoader with device = cpu hands out the same batches as the default") {
  auto ds = numbered_dataset();
  data::DataLoader plain(ds, {.batch_size = 8, .shuffle = true, .seed = 5});
  data::DataLoader on_cpu(ds, {.batch_size = 8, .shuffle = true, .device = Device::cpu(), .seed = 5});
  auto a = epoch(plain), b = epoch(on_cpu);
  REQUIRE(a.size() == 5);
  REQUIRE(b.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    check_close(b[i].x, a[i].x, kExact, "x");
    check_close(b[i].y, a[i].y, kExact, "y");
    CHECK(b[i].x.device() == Device::cpu());
  }
}

TEST_CASE("data: DataLoader option device = cuda without a GPU throws naming the option" *
          doctest::skip(cuda::is_available())) {
  auto ds = numbered_dataset();
  CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.batch_size = 8, .device = Device::cuda()}),
                       doctest::Contains("DataLoader: option device = cuda:0"), Error);
  CHECK_THROWS_WITH_AS(cuda::CopyStream(Device::cuda()), doctest::Contains("cuda:0 was asked for"), Error);
  CHECK(cuda::cache_devices().empty());
  CHECK(cuda::cache_stats(0).allocations == 0);
  CHECK(profiler::cuda_device_timer() == nullptr);
}

TEST_CASE("cuda: DataLoader copies batches to the GPU on a side stream, equal to the CPU's" * MDL_CUDA_ONLY) {
  auto ds = numbered_dataset();
  data::DataLoader host(ds, {.batch_size = 8, .shuffle = true, .seed = 7});
  const auto want = epoch(host);
  for (int workers : {0, 2})
    for (bool pin : {false, true}) {
      data::DataLoader gpu(ds, {.batch_size = 8,
                                .shuffle = true,
                                .num_workers = workers,
                                .prefetch = 3,
                                .pin_memory = pin,
                                .device = Device::cuda(),
                                .seed = 7});
      for (int e = 0; e < 2; ++e) {  // the second epoch reuses side-stream blocks freed in the first
        gpu.set_epoch(0);
        size_t i = 0;
        for (auto& b : gpu) {
          REQUIRE(i < want.size());
          CHECK(b.x.device() == Device::cuda());
          CHECK(b.y.device() == Device::cuda());
          // Compute on mdl's stream right away: it must see the copied data.
          check_close((b.x * 2.0).cpu(), want[i].x * 2.0, kExact, "x on the GPU");
          check_close(b.y.cpu(), want[i].y, kExact, "y on the GPU");
          ++i;
        }
        CHECK(i == want.size());
      }
    }
  CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.device = Device::cuda(1)}), doctest::Contains("only cuda:0"), Error);
}

TEST_CASE("cuda: side-stream memory is reused only after mdl's stream has read it" * MDL_CUDA_ONLY) {
  cuda::CopyStream copies(Device::cuda());
  Tensor a = cuda::pin_memory(full({1 << 20}, 1.0)), b = cuda::pin_memory(full({1 << 20}, 2.0));
  Tensor sums = zeros({64}, Device::cuda());
  for (int i = 0; i < 64; ++i) {
    // A long kernel chain on mdl's stream reads the copy; the copy's block is freed at once and the
    // next copy (the other value) may take it only once that chain has run.
    Tensor x = copies.wait(copies.copy(i % 2 ? b : a));
    Tensor y = x;
    for (int k = 0; k < 8; ++k) y = y * 1.0 + 0.0;
    sums.narrow(0, i, 1).copy_(sum(y).reshape({1}));
  }
  const auto got = sums.cpu().to_vector<double>();
  for (int i = 0; i < 64; ++i) CHECK_MESSAGE(got[size_t(i)] == double(1 << 20) * (i % 2 ? 2 : 1), "copy ", i);
  CHECK_THROWS_WITH_AS(copies.copy(zeros({2}, Device::cuda())), doctest::Contains("expected a CPU tensor"), Error);
}

TEST_CASE("cuda: the caching allocator keeps statistics per device, with a total" * MDL_CUDA_ONLY) {
  Tensor t = empty({1 << 20}, Device::cuda());
  const auto devices = cuda::cache_devices();
  REQUIRE_FALSE(devices.empty());
  CHECK(devices.front() == 0);
  int64_t allocated = 0, allocations = 0;
  for (int d : devices) {
    allocated += cuda::cache_stats(d).allocated_bytes;
    allocations += cuda::cache_stats(d).allocations;
  }
  CHECK(allocated == cuda::cache_stats().allocated_bytes);
  CHECK(allocations == cuda::cache_stats().allocations);
  CHECK(cuda::cache_stats(0).allocated_bytes >= int64_t(4) << 20);
  t = Tensor();
  cuda::empty_cache();
  CHECK(cuda::cache_stats(0).reserved_bytes <= cuda::cache_stats().reserved_bytes);
  CHECK(cuda::cache_stats(63).allocations == 0);  // a device never used
}

TEST_CASE("cuda: the profiler times CUDA kernels with events on mdl's stream" * MDL_CUDA_ONLY) {
  REQUIRE(profiler::cuda_device_timer() != nullptr);
  profiler::set_device_timer(profiler::cuda_device_timer());  // another test may have swapped it out
  Tensor a = randn({512, 512}, Device::cuda()), b = randn({512, 512}, Device::cuda());
  cuda::synchronize();
  profiler::Session prof;
  Tensor c = matmul(a, b);
  Tensor d = relu(c) + 1.0;
  prof.stop();
  auto launches = profiler_test::find_all(prof, "matmul", profiler::EventKind::Kernel);
  auto device = profiler_test::find_all(prof, "matmul", profiler::EventKind::DeviceKernel);
  REQUIRE(launches.size() == 1);
  REQUIRE(device.size() == 1);
  const auto& ev = prof.events();
  CHECK(ev[device[0]].dur_ns() > 0);
  CHECK(prof.threads()[ev[device[0]].tid].name == "cuda:0 stream 0");
  CHECK(profiler_test::find_all(prof, "binary", profiler::EventKind::DeviceKernel).size() >= 1);
  CHECK(d.cpu().numel() == 512 * 512);
}
