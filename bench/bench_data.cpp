// The input pipeline's switches, each measured on one epoch of Fashion-MNIST as a PNG ImageFolder
// (made by data::export_image_folder under /tmp once; 10,000 images unless --images=N): no cache
// vs memory cache vs file cache, 1 vs 2 workers, prefetch 0 vs 4, first with no compute (pure
// input speed), then with a simulated per-batch compute (a busy-wait calibrated to 1.5x the
// measured per-batch loading time), where prefetching should hide loading. The file cache is built
// by another process (this binary run with --fill-file-cache), so the timed epochs read it as a
// later run would, never the cache their own process just wrote; its pair runs twice, with every
// file (PNGs and cache) in the page cache, and with every file evicted before each epoch
// (posix_fadvise DONTNEED; mincore measures what stayed resident). With CUDA and a GPU,
// pinned vs pageable host-to-device copies of a batch. A closing table gives the ratios and the
// consumer's wait as a share of the epoch (the goal: under 5% with cache and prefetch on).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/recording_reporter.h"
#include "data/export.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "data/pinned.h"
#include "mdl.h"
#include "cuda/api.h"
#include "bench/switch_bench.h"

using namespace mdl;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

int64_t g_images = 10000;
double g_compute_ms = 0;  // set by calibrate()
const fs::path kRoot = fs::temp_directory_path() / "mdl-bench-data";

fs::path png_dir() { return kRoot / ("fashion-mnist-png-" + std::to_string(g_images)); }

// Exports the first g_images training images once; a marker file says the export finished.
void ensure_png_folder() {
  const fs::path done = png_dir() / "EXPORTED";
  if (fs::exists(done)) return;
  fs::remove_all(png_dir());
  const auto t0 = Clock::now();
  data::FashionMNIST train;
  data::export_image_folder(train, png_dir().string(), data::FashionMNIST::classes(),
                            {.limit = g_images, .threads = 2});
  std::ofstream(done) << g_images << "\n";
  std::printf("exported %lld PNGs to %s in %.1f s\n", static_cast<long long>(g_images), png_dir().c_str(),
              std::chrono::duration<double>(Clock::now() - t0).count());
}

const data::ImageFolder& dataset() {
  static data::ImageFolder ds(png_dir().string(), data::Channels::Gray);
  return ds;
}

data::TransformPtr augment() {
  return std::make_shared<data::Compose>(std::vector<data::TransformPtr>{std::make_shared<data::RandomCrop>(28, 2),
                                                                         std::make_shared<data::RandomHorizontalFlip>(),
                                                                         std::make_shared<data::ToTensor>()});
}

void busy_wait_ms(double ms) {
  const auto end = Clock::now() +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  while (Clock::now() < end) {}
}

struct Config {
  std::string name;
  data::Cache cache;
  int workers, prefetch;
  bool compute;
  bool cold = false;  // every file evicted from the page cache before each timed epoch
};

fs::path cache_dir() { return kRoot / "cache"; }

// Every regular file the loader may read: the PNGs and the file cache.
std::vector<fs::path> input_files() {
  std::vector<fs::path> files;
  for (const fs::path& dir : {png_dir(), cache_dir()})
    if (fs::exists(dir))
      for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
  return files;
}

// Asks the kernel to drop the files' clean pages (no root needed); returns the share of their
// pages still resident afterwards (mincore), in %.
double evict_page_cache(const std::vector<fs::path>& files) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  int64_t pages = 0, resident = 0;
  for (const fs::path& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const off_t size = ::lseek(fd, 0, SEEK_END);
    if (size > 0) {
      void* map = ::mmap(nullptr, size_t(size), PROT_READ, MAP_SHARED, fd, 0);
      if (map != MAP_FAILED) {
        std::vector<unsigned char> in((size_t(size) + size_t(page) - 1) / size_t(page));
        if (::mincore(map, size_t(size), in.data()) == 0)
          for (unsigned char b : in) resident += b & 1;
        pages += int64_t(in.size());
        ::munmap(map, size_t(size));
      }
    }
    ::close(fd);
  }
  return pages ? 100.0 * double(resident) / double(pages) : 0.0;
}

data::LoaderOptions options(const Config& c) {
  return {.batch_size = 128,
          .shuffle = true,
          .num_workers = c.workers,
          .prefetch = c.prefetch,
          .cache = c.cache,
          .cache_dir = (kRoot / "cache").string(),
          .seed = 0,
          .transform = augment()};
}

struct Measured {
  double ms_per_epoch = 0, wait_pct = 0, images_per_s = 0;
};
std::map<std::string, Measured> g_results;

// The file cache as an earlier run leaves it: built from scratch by another process.
void fill_file_cache_in_child() {
  fs::remove_all(cache_dir());
  const std::string cmd = fs::read_symlink("/proc/self/exe").string() +
                          " --fill-file-cache --images=" + std::to_string(g_images) + " > /dev/null";
  MDL_CHECK(std::system(cmd.c_str()) == 0, "bench_data: '", cmd, "' failed");
}

// One iteration is one epoch. A memory cache is filled by an untimed epoch first; a file cache by
// another process, before the loader opens it.
void epoch(benchmark::State& state, const Config& c) {
  if (c.cache == data::Cache::File) fill_file_cache_in_child();
  data::DataLoader loader(dataset(), options(c));
  if (c.cache == data::Cache::Memory)
    for (auto& batch : loader) benchmark::DoNotOptimize(batch.x.raw_data());
  if (!c.cold)  // warm: every file read once, so the timed epochs find it in the page cache
    for (const fs::path& f : input_files()) std::ifstream(f, std::ios::binary).ignore(int64_t(1) << 40);
  loader.reset_stats();
  double resident = 100;
  for (auto _ : state) {
    if (c.cold) {
      state.PauseTiming();
      resident = evict_page_cache(input_files());
      state.ResumeTiming();
    }
    for (auto& [x, y] : loader) {
      benchmark::DoNotOptimize(x.raw_data());
      benchmark::DoNotOptimize(y.raw_data());
      if (c.compute) busy_wait_ms(g_compute_ms);
    }
  }
  const data::LoaderStats s = loader.stats();
  if (c.cache == data::Cache::File && !s.file_cache_reused)
    state.SkipWithError("the file cache built by --fill-file-cache was not reused");
  state.counters["resident%"] = resident;  // of the files' pages, at the start of the last epoch
  Measured m{1e3 * s.epoch_seconds / double(s.epochs), 100.0 * s.wait_fraction(), double(s.samples) / s.epoch_seconds};
  g_results[c.name] = m;
  state.counters["ms/epoch"] = m.ms_per_epoch;
  state.counters["wait%"] = m.wait_pct;
  state.counters["img/s"] = m.images_per_s;
  state.counters["hit%"] = 100.0 * double(s.cache_hits) / double(std::max<int64_t>(1, s.cache_hits + s.cache_misses));
  state.counters["MB_read"] = double(s.bytes_read) / 1e6;
}

// Loading time per batch with one worker and no cache, without compute: what the simulated
// compute is measured against.
// The first epoch is left out: it reads the PNGs from a cold page cache.
void calibrate() {
  data::DataLoader loader(dataset(), options({"", data::Cache::None, 1, 4, false}));
  for (auto& batch : loader) benchmark::DoNotOptimize(batch.x.raw_data());
  loader.reset_stats();
  for (auto& batch : loader) benchmark::DoNotOptimize(batch.x.raw_data());
  const data::LoaderStats s = loader.stats();
  const double load_ms = 1e3 * s.epoch_seconds / double(s.batches);
  g_compute_ms = 1.5 * load_ms;
  std::printf("calibration: %.2f ms to load a batch of 128 (1 worker, no cache); simulated compute %.2f ms per batch\n",
              load_ms, g_compute_ms);
}

// Host-to-device copy of a batch-sized buffer, pageable or pinned (CUDA with a GPU only).
void h2d(benchmark::State& state, bool pinned) {
  const int64_t n = state.range(0);
  Tensor host = pinned ? data::empty_pinned({n}, kF32) : empty({n});
  host.fill_(1.0);
  for (auto _ : state) {
    Tensor dev = host.to(Device::cuda());
    cuda::synchronize();
    benchmark::DoNotOptimize(dev.raw_data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 4);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--images=", 9) == 0) g_images = std::atoll(argv[i] + 9);
    else rest.push_back(argv[i]);
  }
  int rest_argc = int(rest.size());
  const bool listing = bench::listing_only(argc, argv);  // names only: no data, no calibration
  if (!listing) ensure_png_folder();
  if (rest.size() > 1 && std::strcmp(rest[1], "--fill-file-cache") == 0) {  // the child of fill_file_cache_in_child
    data::DataLoader loader(dataset(), options({"", data::Cache::File, 1, 4, false}));
    for (auto& batch : loader) benchmark::DoNotOptimize(batch.x.raw_data());
    return 0;
  }
  if (!listing) {
    std::printf(
        "dataset: %lld Fashion-MNIST training images as PNG in %s; batch 128, RandomCrop(28, 2) + flip + ToTensor\n",
        static_cast<long long>(dataset().size()), png_dir().c_str());
    calibrate();
  }

  // Each loader switch as a pair that differs in that switch alone, then combinations of them.
  using data::Cache;
  std::vector<Config> configs;
  auto add_pair = [&](const char* name, const char* case_name, Config off, Config on) {
    off.name = bench::switch_benchmark(name, false, case_name);
    on.name = bench::switch_benchmark(name, true, case_name);
    configs.push_back(off);
    configs.push_back(on);
  };
  add_pair("loader_memory_cache", "load_w1_p4", {"", Cache::None, 1, 4, false}, {"", Cache::Memory, 1, 4, false});
  add_pair("loader_file_cache", "load_w1_p4", {"", Cache::None, 1, 4, false}, {"", Cache::File, 1, 4, false});
  add_pair("loader_file_cache", "load_w1_p4_cold", {"", Cache::None, 1, 4, false, true},
           {"", Cache::File, 1, 4, false, true});
  add_pair("loader_workers", "load_no_cache_p4", {"", Cache::None, 1, 4, false}, {"", Cache::None, 2, 4, false});
  add_pair("prefetch", "compute_no_cache_w1", {"", Cache::None, 1, 0, true}, {"", Cache::None, 1, 4, true});
  for (const Config& c : std::vector<Config>{{"load/memory/w2/p4", Cache::Memory, 2, 4, false},
                                             {"load/file/w2/p4", Cache::File, 2, 4, false},
                                             {"compute/none/w0", Cache::None, 0, 0, true},
                                             {"compute/none/w2/p4", Cache::None, 2, 4, true},
                                             {"compute/memory/w1/p0", Cache::Memory, 1, 0, true},
                                             {"compute/memory/w1/p4", Cache::Memory, 1, 4, true},
                                             {"compute/memory/w2/p4", Cache::Memory, 2, 4, true},
                                             {"compute/file/w2/p4", Cache::File, 2, 4, true}})
    configs.push_back(c);
  for (const Config& c : configs)
    benchmark::RegisterBenchmark(c.name.c_str(), [c](benchmark::State& s) { epoch(s, c); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(2);
  if (cuda::is_available() || bench::listing_only(argc, argv))
    for (bool pinned : {false, true})
      bench::register_switch("pin_memory", pinned, "h2d", h2d)->Arg(128 * 784)->Arg(16 << 20)->UseRealTime();

  if (!bench::run_benchmarks(rest_argc, rest.data())) return 1;
  if (!cuda::is_available())
    std::printf("\npinned vs pageable host-to-device: not measured (%s)\n",
                cuda::compiled() ? "no GPU found" : "no CUDA in this build");

  auto get = [](const std::string& name) { return g_results.count(name) ? g_results[name] : Measured{}; };
  std::printf("\n%-40s %12s %8s %10s\n", "config", "ms/epoch", "wait%", "img/s");
  for (const Config& c : configs)
    if (g_results.count(c.name))
      std::printf("%-40s %12.1f %8.1f %10.0f\n", c.name.c_str(), get(c.name.c_str()).ms_per_epoch,
                  get(c.name.c_str()).wait_pct, get(c.name.c_str()).images_per_s);
  auto ratio = [&](const char* what, const std::string& slow, const std::string& fast) {
    if (g_results.count(slow) && g_results.count(fast))
      std::printf("%-44s %6.2fx  (%s vs %s)\n", what, get(slow).ms_per_epoch / get(fast).ms_per_epoch, fast.c_str(),
                  slow.c_str());
  };
  auto switch_ratio = [&](const char* what, const char* name, const char* case_name) {
    ratio(what, bench::switch_benchmark(name, false, case_name), bench::switch_benchmark(name, true, case_name));
  };
  std::printf("\nspeed-ups (epoch time, slow / fast):\n");
  switch_ratio("memory cache over none (1 worker, no compute)", "loader_memory_cache", "load_w1_p4");
  switch_ratio("file cache over none (1 worker, no compute)", "loader_file_cache", "load_w1_p4");
  switch_ratio("same, every file evicted from the page cache", "loader_file_cache", "load_w1_p4_cold");
  switch_ratio("2 workers over 1 (no cache, no compute)", "loader_workers", "load_no_cache_p4");
  switch_ratio("prefetch 4 over 0 (no cache, compute)", "prefetch", "compute_no_cache_w1");
  ratio("prefetch 4 over 0 (memory cache, compute)", "compute/memory/w1/p0", "compute/memory/w1/p4");
  ratio("workers+prefetch over synchronous (compute)", "compute/none/w0", "compute/none/w2/p4");
  if (g_results.count("compute/memory/w2/p4"))
    std::printf(
        "\nmemory cache + prefetch 4 + 2 workers, compute %.2f ms/batch: the consumer waited %.1f%% of the epoch "
        "(goal < 5%%)\n",
        g_compute_ms, get("compute/memory/w2/p4").wait_pct);
  return 0;
}
