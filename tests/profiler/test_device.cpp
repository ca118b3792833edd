// The profiler's two edges: device kernels timed through a DeviceTimer (driven here by a fake
// timer, as no GPU is needed to check the bookkeeping), and the off path of the kernel hook,
// which must not allocate.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "profiler/device_timer.h"
#include "tests/support/profiler_test_util.h"
#include "kernels/core.h"

using namespace mdl;
using namespace profiler_test;

namespace {

// Counts operator new calls on the thread that asks for it.
thread_local bool t_count_news = false;
std::atomic<int64_t> g_news{0};

class FakeTimer final : public profiler::DeviceTimer {
 public:
  uint64_t start(Device d) override {
    CHECK(d == Device::cuda(0));
    return ++started;
  }
  void stop(uint64_t handle) override {
    CHECK(handle == started);
    ++stopped;
  }
  void synchronize() override { synced = true; }
  // Kernel h ran for 500 ns at device time 10,000 h on stream 7.
  Timing resolve(uint64_t h) override {
    return {.valid = true, .start_ns = 10'000 * int64_t(h), .dur_ns = 500, .stream = 7};
  }
  void reset() override { ++resets; }
  uint64_t started = 0, stopped = 0;
  bool synced = false;
  int resets = 0;
};

}  // namespace

// The replaceable allocation functions of this test binary, on malloc/free, counting. Every
// unaligned form is replaced so that each new meets its own delete (the sanitizer checks it);
// the aligned forms stay the runtime's, pairing among themselves.
void* operator new(size_t n) {
  if (t_count_news) g_news.fetch_add(1);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (t_count_news) g_news.fetch_add(1);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

TEST_CASE("profiler: device kernels land on a track per stream, aligned to their launch") {
  FakeTimer timer;
  profiler::set_device_timer(&timer);
  profiler::Session prof;
  const profiler::detail::KernelArg none[] = {{}};
  { profiler::detail::KernelRange launch("fake_kernel", Device::cuda(0), none, 0); }
  { profiler::detail::KernelRange launch("fake_kernel", Device::cuda(0), none, 0); }
  CHECK_THROWS_WITH_AS(profiler::set_device_timer(nullptr), doctest::Contains("while a session records"), Error);
  prof.stop();
  profiler::set_device_timer(nullptr);
  CHECK(timer.started == 2);
  CHECK(timer.stopped == 2);
  CHECK(timer.synced);
  CHECK(timer.resets == 2);  // at start and after stop
  auto launches = find_all(prof, "fake_kernel", EventKind::Kernel);
  auto device = find_all(prof, "fake_kernel", EventKind::DeviceKernel);
  REQUIRE(launches.size() == 2);
  REQUIRE(device.size() == 2);
  const auto& ev = prof.events();
  CHECK(prof.threads()[ev[device[0]].tid].name == "cuda:0 stream 7");
  CHECK(ev[device[0]].tid == ev[device[1]].tid);
  CHECK(ev[device[0]].start_ns == ev[launches[0]].start_ns);
  CHECK(ev[device[1]].start_ns - ev[device[0]].start_ns == 10'000);
  CHECK(ev[device[0]].dur_ns() == 500);
  const std::string t = prof.table();
  CHECK(t.find("cuda:0 launch") != std::string::npos);
  CHECK(t.find("device_kernel  cuda:0 ") != std::string::npos);
}

TEST_CASE("profiler: the kernel hook's off path does not allocate") {
  Tensor t = empty({1024});
  kernels::fill(Device::cpu(), t, 1.0);  // registers the kernels first
  REQUIRE_FALSE(profiler::detail::recording());
  g_news = 0;
  t_count_news = true;
  kernels::fill.cpu(t, 2.0);
  const int64_t direct = g_news.exchange(0);
  kernels::fill(Device::cpu(), t, 3.0);
  const int64_t through_hook = g_news.exchange(0);
  t_count_news = false;
  CHECK(through_hook == direct);
  CHECK(t.to_vector<float>()[1023] == 3.0f);
}
