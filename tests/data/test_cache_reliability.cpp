// The caches under damage, attack and failure: a changed record is a miss (never wrong data) and
// the file is rebuilt; index entries that overflow are rejected when the file is opened; crafted
// record headers give an mdl::Error; the default folder is private to the user; partial files are
// never opened through a planted link, and stale ones are swept unless their writer still holds
// its lock; a failed cache write is an error of the cache, not a skipped sample; a failed sample is
// remembered for the run only; the memory cache keeps the first of two concurrent stores of one
// index. And the loader: a break stops the workers after their current sample; workers run OpenMP
// with worker_threads threads (mdl-train gives them their share of --threads); batches thrown away
// give their device copy events back.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "data/cache.h"
#include "data/loader.h"
#include "tests/support/data_test_util.h"
#include "tests/support/test_util.h"
#include "mdl.h"
#include "tools/mdl_train/options.h"
#include "tools/mdl_train/setup.h"

using namespace mdl;
using namespace data_test;
using data::Cache;
using data::DataLoader;
using data::FileCache;
using data::MemoryCache;

namespace {

data::Sample sample_of(int64_t i) { return {full({5}, double(i) + 0.5), data::label_tensor(i)}; }

bool same(const data::Sample& a, const data::Sample& b) {
  return a.x.to_vector<float>() == b.x.to_vector<float>() && a.y.to_vector<int64_t>() == b.y.to_vector<int64_t>();
}

// A complete cache file of `n` samples (sample_of(i)) in `dir` under `key`; returns its path.
std::string build_cache(const fs::path& dir, const std::string& key, int64_t n) {
  FileCache c(dir.string(), key, n);
  for (int64_t i = 0; i < n; ++i) c.store(i, sample_of(i));
  REQUIRE(c.complete());
  return c.path();
}

uint64_t u64_at(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void set_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// Where the index starts: the footer (from the last "MDLCACHE") names it after magic, version, count.
size_t index_at(const std::vector<uint8_t>& b) {
  const std::string s(b.begin(), b.end());
  const size_t magic = s.rfind("MDLCACHE");
  REQUIRE(magic != std::string::npos);
  return size_t(u64_at(b, magic + 24));
}

// A dataset of sample_of(i), optionally failing some indices or sleeping in get().
class Synthetic : public data::Dataset {
 public:
  explicit Synthetic(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Sample get(int64_t i) const override {
    ++gets;
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    MDL_CHECK(i != failing, "Synthetic: cannot read sample ", i);
    return sample_of(i);
  }
  std::string identity() const override { return "synthetic:" + std::to_string(n_); }
  int64_t failing = -1;
  int sleep_ms = 0;
  mutable std::atomic<int64_t> gets{0};

 private:
  int64_t n_;
};

// Sets an environment variable for the scope, then restores it.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> saved;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) saved = v;
    if (value) ::setenv(n, value, 1);
    else ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (saved) ::setenv(name.c_str(), saved->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

namespace {

// A deterministic before-cache transform that records the OpenMP thread count of the thread it runs on.
class ThreadCountProbe : public data::Transform {
 public:
  std::string name() const override { return "ThreadCountProbe"; }
  Tensor operator()(const Tensor& x, Generator&) const override {
    seen = get_num_threads();
    return x;
  }
  mutable std::atomic<int> seen{0};
};

}  // namespace

TEST_CASE("file cache: a record whose bytes changed is a miss, never wrong data, and the next run rebuilds") {
  TempDir dir("cache_crc");
  const std::string path = build_cache(dir.path, "k", 3);
  {
    FileCache probe(dir.path.string(), "k", 3);
    REQUIRE(probe.reused());
  }
  std::vector<uint8_t> bytes = read_bytes(path);
  const size_t index = index_at(bytes);
  // Index entries start with (offset, length); record 1 follows record 0, so the entry size is
  // where record 0's length appears again as record 1's offset.
  const uint64_t len0 = u64_at(bytes, index + 8);
  const size_t entry_size = u64_at(bytes, index + 16) == len0 ? 16 : 24;
  const uint64_t off = u64_at(bytes, index + entry_size), len = u64_at(bytes, index + entry_size + 8);
  REQUIRE(off == len0);
  // The last payload byte of sample 1 (its label's high byte): the record still parses.
  bytes[size_t(off + len - 1)] ^= 0x40;
  write_bytes(path, bytes);
  {
    FileCache reopened(dir.path.string(), "k", 3);
    REQUIRE(reopened.reused());
    for (int64_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      std::optional<data::Sample> s;
      CHECK_NOTHROW(s = reopened.lookup(i));
      if (i == 1) CHECK_FALSE(s.has_value());
      else REQUIRE((s && same(*s, sample_of(i))));
    }
    reopened.store(1, sample_of(1));  // what the loader does after the miss
  }
  FileCache next(dir.path.string(), "k", 3);
  CHECK_FALSE(next.reused());  // the damaged file was removed; this run builds it again
}

TEST_CASE("file cache: index entries whose offset + length overflows are rejected when the file is opened") {
  TempDir dir("cache_overflow");
  const std::string path = build_cache(dir.path, "k", 2);
  std::vector<uint8_t> bytes = read_bytes(path);
  const size_t index = index_at(bytes);
  set_u64(bytes, index, uint64_t(1) << 62);                              // offset of record 0
  set_u64(bytes, index + 8, (uint64_t(1) << 62) + (uint64_t(1) << 61));  // + length wraps negative
  write_bytes(path, bytes);
  FileCache c(dir.path.string(), "k", 2);
  CHECK_FALSE(c.reused());
  for (int64_t i = 0; i < 2; ++i) {
    std::optional<data::Sample> s;
    CHECK_NOTHROW(s = c.lookup(i));
    CHECK_FALSE(s.has_value());
  }
}

TEST_CASE("file cache: a footer whose index offset overflows with the index size is rejected") {
  TempDir dir("cache_footer");
  const std::string path = build_cache(dir.path, "k", 2);
  std::vector<uint8_t> bytes = read_bytes(path);
  const std::string s(bytes.begin(), bytes.end());
  set_u64(bytes, s.rfind("MDLCACHE") + 24, (uint64_t(1) << 63) - 8);
  write_bytes(path, bytes);
  FileCache c(dir.path.string(), "k", 2);
  CHECK_FALSE(c.reused());
}

TEST_CASE("file cache: crafted record headers give an mdl::Error naming the place, never a huge allocation") {
  auto record = [](uint8_t dtype, uint8_t dim, std::vector<uint64_t> dims) {
    std::string r = "S";
    r += char(dtype);
    r += char(dim);
    for (uint64_t d : dims) r.append(reinterpret_cast<const char*>(&d), 8);
    return r;
  };
  const uint64_t big = uint64_t(1) << 40;
  for (const std::string& r : {record(uint8_t(kU8), 2, {big, big}), record(uint8_t(kF32), 3, {big, 0, big}),
                               record(uint8_t(kU8), 1, {~uint64_t(0)}), record(uint8_t(kU8), 9, {}),
                               record(200, 1, {1}), record(uint8_t(kF32), 4, {1, 2})}) {
    CHECK_THROWS_WITH_AS(data::deserialize_sample(reinterpret_cast<const uint8_t*>(r.data()), r.size(), "here"),
                         doctest::Contains("FileCache: here: "), Error);
  }
}

TEST_CASE("file cache: the default folder is private to the user: $XDG_CACHE_HOME/mdl, else ~/.cache/mdl") {
  TempDir dir("cache_default");
  Synthetic ds(4);
  SUBCASE("XDG_CACHE_HOME") {
    ScopedEnv xdg("XDG_CACHE_HOME", dir.path.c_str());
    { DataLoader loader(ds, {.batch_size = 2, .cache = Cache::File}); }
    REQUIRE(fs::is_directory(dir.path / "mdl"));
    struct stat st {};
    REQUIRE(::stat((dir.path / "mdl").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    CHECK(st.st_uid == ::geteuid());
  }
  SUBCASE("HOME when XDG_CACHE_HOME is unset or empty") {
    ScopedEnv xdg("XDG_CACHE_HOME", "");
    ScopedEnv home("HOME", dir.path.c_str());
    { DataLoader loader(ds, {.batch_size = 2, .cache = Cache::File}); }
    CHECK(fs::is_directory(dir.path / ".cache" / "mdl"));
  }
  SUBCASE("a folder that others may write to is refused, naming it") {
    ScopedEnv xdg("XDG_CACHE_HOME", dir.path.c_str());
    fs::create_directories(dir.path / "mdl");
    ::chmod((dir.path / "mdl").c_str(), 0777);
    CHECK_THROWS_WITH_AS(DataLoader(ds, {.batch_size = 2, .cache = Cache::File}),
                         doctest::Contains((dir.path / "mdl").string().c_str()), Error);
  }
  SUBCASE("a file where the folder should be is refused, naming it") {
    ScopedEnv xdg("XDG_CACHE_HOME", dir.path.c_str());
    write_bytes((dir.path / "mdl").string(), {'x'});
    CHECK_THROWS_WITH_AS(DataLoader(ds, {.batch_size = 2, .cache = Cache::File}),
                         doctest::Contains((dir.path / "mdl").string().c_str()), Error);
  }
}

TEST_CASE("file cache: files planted as links are never followed") {
  TempDir dir("cache_links");
  const fs::path a = dir.path / "a", b = dir.path / "b";
  fs::create_directories(a);
  fs::create_directories(b);
  const std::string built = build_cache(a, "k", 2);
  const std::vector<uint8_t> original = read_bytes(built);
  const std::string name = fs::path(built).filename().string();
  SUBCASE("a link at the final name is not read as a complete cache") {
    fs::create_symlink(built, b / name);
    FileCache c(b.string(), "k", 2);
    CHECK_FALSE(c.reused());
  }
  SUBCASE("links at every predictable partial name are left alone") {
    for (int n = 0; n < 1000; ++n)
      fs::create_symlink(built, b / (name + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(n)));
    FileCache c(b.string(), "k", 2);
    c.store(0, sample_of(7));
    c.store(1, sample_of(8));
    CHECK(c.complete());
  }
  CHECK(read_bytes(built) == original);
  CHECK(fs::is_regular_file(fs::symlink_status(built)));
}

TEST_CASE("file cache: partial files of dead processes, or untouched for an hour, are swept when a cache opens") {
  TempDir dir("cache_sweep");
  const std::string dead = "0123.mdlcache.partial-2147483000-ab12";
  const std::string old = "4567.mdlcache.partial-" + std::to_string(::getpid()) + "-cd34";
  const std::string live = "89ab.mdlcache.partial-" + std::to_string(::getpid()) + "-ef56";
  const std::string other = "notes.txt";
  for (const std::string& f : {dead, old, live, other}) write_bytes(dir.file(f), {'x'});
  fs::last_write_time(dir.file(old), fs::file_time_type::clock::now() - std::chrono::hours(2));
  FileCache c(dir.path.string(), "k", 1);
  CHECK_FALSE(fs::exists(dir.file(dead)));
  CHECK_FALSE(fs::exists(dir.file(old)));
  CHECK(fs::exists(dir.file(live)));
  CHECK(fs::exists(dir.file(other)));
}

TEST_CASE("file cache: a live writer's partial file is never swept, even untouched for an hour") {
  TempDir dir("cache_live");
  FileCache writer(dir.path.string(), "a", 2);
  writer.store(0, sample_of(0));
  std::vector<fs::path> partials;
  for (const auto& e : fs::directory_iterator(dir.path)) partials.push_back(e.path());
  REQUIRE(partials.size() == 1);
  // As a writer in another PID namespace looks, or one waiting an hour for its next sample.
  fs::last_write_time(partials[0], fs::file_time_type::clock::now() - std::chrono::hours(2));
  FileCache other(dir.path.string(), "b", 1);  // opening a cache sweeps the folder
  CHECK(fs::exists(partials[0]));
  CHECK_NOTHROW(writer.store(1, sample_of(1)));
  CHECK(writer.complete());
  CHECK(FileCache(dir.path.string(), "a", 2).reused());
}

TEST_CASE("data: a failed cache write is an error naming the cache file, not a skipped sample") {
  TempDir dir("cache_full");
  Synthetic ds(8);
  DataLoader loader(
      ds, {.batch_size = 4, .cache = Cache::File, .cache_dir = dir.path.string(), .on_error = data::OnError::Skip});
  // A full disk, as the file size limit makes it: writes past 100 bytes fail with EFBIG.
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved {};
  ::getrlimit(RLIMIT_FSIZE, &saved);
  struct rlimit small = saved;
  small.rlim_cur = 100;
  ::setrlimit(RLIMIT_FSIZE, &small);
  bool threw = false;
  std::string what;
  try {
    run_epoch(loader);
  } catch (const Error& e) {
    threw = true;
    what = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK(what.find(dir.path.string()) != std::string::npos);
  CHECK(what.find(".mdlcache") != std::string::npos);
  CHECK(loader.stats().skipped == 0);
}

TEST_CASE("data: a failed sample is remembered for the run only; a later run tries it again") {
  TempDir dir("cache_transient");
  Synthetic ds(6);
  const data::LoaderOptions opt{.batch_size = 3,
                                .num_workers = 1,
                                .cache = Cache::File,
                                .cache_dir = dir.path.string(),
                                .on_error = data::OnError::Skip};
  ds.failing = 4;  // a passing read error
  {
    DataLoader loader(ds, opt);
    run_epoch(loader);
    run_epoch(loader);
    CHECK(loader.stats().skipped == 2);
    CHECK(ds.gets == 6);  // not read again in the second epoch
  }
  ds.failing = -1;
  {
    DataLoader loader(ds, opt);
    const Epoch e = run_epoch(loader);
    CHECK(loader.stats().skipped == 0);
    REQUIRE(e.y.size() == 2);
    CHECK(e.y[1] == std::vector<int64_t>{3, 4, 5});
  }
  DataLoader rebuilt(ds, opt);  // the file held a failure that did not repeat: it is built again, whole
  run_epoch(rebuilt);
  CHECK_FALSE(rebuilt.stats().file_cache_reused);
  DataLoader reused(ds, opt);
  run_epoch(reused);
  CHECK(reused.stats().file_cache_reused);
  CHECK(reused.stats().cache_misses == 0);
}

TEST_CASE("memory cache: concurrent stores of one index keep the first; every lookup sees the same sample") {
  constexpr int kThreads = 3;
  int disagreements = 0;
  for (int round = 0; round < 3000 && disagreements == 0; ++round) {
    MemoryCache cache(1);
    std::atomic<int> arrived{0};
    std::vector<float> seen[kThreads];
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        const data::Sample s = sample_of(t);
        arrived.fetch_add(1);
        while (arrived.load() < kThreads) std::this_thread::yield();
        cache.store(0, s);
        std::optional<data::Sample> got;
        while (!(got = cache.lookup(0))) std::this_thread::yield();  // empty while another store is written
        seen[t] = got->x.to_vector<float>();
      });
    for (std::thread& t : threads) t.join();
    for (int t = 1; t < kThreads; ++t) disagreements += seen[t] != seen[0];
  }
  CHECK(disagreements == 0);
}

TEST_CASE("data: breaking out of an epoch returns without waiting for whole in-flight batches") {
  Synthetic ds(64);
  ds.sleep_ms = 50;
  DataLoader loader(ds, {.batch_size = 16, .num_workers = 2, .prefetch = 2});
  std::chrono::steady_clock::time_point broke;
  {
    auto it = loader.begin();
    REQUIRE(it != loader.end());
    broke = std::chrono::steady_clock::now();
  }  // the iterator's end stops the epoch
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - broke).count();
  CHECK(seconds < 0.4);  // a batch takes 16 x 50 ms; a worker stops after the sample it is loading
  CHECK(ds.gets < 16 + 2 * 16);
}

TEST_CASE("data: loader workers run OpenMP with one thread by default") {
  Synthetic ds(4);
  auto probe = std::make_shared<ThreadCountProbe>();
  const int saved = get_num_threads();
  set_num_threads(3);  // the consumer's count does not reach the workers' own threads
  DataLoader loader(ds, {.batch_size = 2, .num_workers = 2, .before_cache = probe});
  run_epoch(loader);
  set_num_threads(saved);
  CHECK(probe->seen == 1);
}

TEST_CASE("cuda: batches thrown away by a break give their copy events back" * MDL_CUDA_ONLY) {
  Synthetic ds(64);
  DataLoader loader(ds, {.batch_size = 4, .num_workers = 2, .prefetch = 4, .device = Device::cuda()});
  for (int e = 0; e < 5; ++e) {
    for (auto& b : loader) {
      CHECK(b.x.device() == Device::cuda());
      break;
    }
    CHECK(loader.stats().device_copies_in_flight == 0);
  }
}

TEST_CASE("data: loader workers run OpenMP with worker_threads threads, and mdl-train gives them their share") {
  Synthetic ds(4);
  auto probe = std::make_shared<ThreadCountProbe>();
  DataLoader loader(ds, {.batch_size = 2, .num_workers = 2, .worker_threads = 3, .before_cache = probe});
  run_epoch(loader);
  CHECK(probe->seen == 3);
  CHECK_THROWS_WITH_AS(DataLoader(ds, {.num_workers = 1, .worker_threads = 0}),
                       doctest::Contains("worker_threads must be in [1, 1024], got 0"), Error);

  train::TrainOptions o;
  CHECK(o.cache_dir.empty());  // the private default folder
  o.workers = 2;
  CHECK(train::make_loader_options(o, {}).worker_threads == 1);
  o.threads = 8;
  CHECK(train::make_loader_options(o, {}).worker_threads == 4);
  o.workers = 16;
  CHECK(train::make_loader_options(o, {}).worker_threads == 1);
}
