// DataLoader: epoch order, the worker pool with its ordered, bounded hand-off, per-sample loading
// through the cache and transforms, and the statistics.
#include "data/loader.h"

#include "data/pinned.h"
#include "profiler/scope.h"
#include "cuda/api.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace mdl::data {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
constexpr uint64_t kShuffleStream = 0x5eedf00dull;  // keeps the shuffle apart from sample generators
}  // namespace

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions options) : dataset_(dataset), opt_(std::move(options)) {
  MDL_CHECK(opt_.batch_size >= 1, "DataLoader: batch_size must be at least 1, got ", opt_.batch_size);
  MDL_CHECK(opt_.num_workers >= 0 && opt_.num_workers <= 256, "DataLoader: num_workers must be in [0, 256], got ",
            opt_.num_workers);
  MDL_CHECK(opt_.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ", opt_.prefetch);
  MDL_CHECK(opt_.worker_threads >= 1 && opt_.worker_threads <= 1024,
            "DataLoader: worker_threads must be in [1, 1024], got ", opt_.worker_threads);
  MDL_CHECK(!opt_.before_cache || !opt_.before_cache->is_random(),
            "DataLoader: before_cache must be deterministic, but ", opt_.before_cache->name(),
            " is random (put random transforms in transform, after the cache)");
  MDL_CHECK(!(opt_.sampler && opt_.shuffle), "DataLoader: shuffle and sampler are mutually exclusive (the sampler ",
            "decides the order; DistributedSampler shuffles itself)");
  seed_ = opt_.seed.value_or(default_generator().seed());
  const int64_t n = dataset_.size();
  if (opt_.cache == Cache::Memory) {
    cache_ = std::make_unique<MemoryCache>(n);
  } else if (opt_.cache == Cache::File) {
    const std::string dir = opt_.cache_dir.empty() ? default_cache_dir() : opt_.cache_dir;
    const std::string key = dataset_.identity() +
                            "|before_cache=" + (opt_.before_cache ? opt_.before_cache->name() : "");
    auto file = std::make_unique<FileCache>(dir, key, n);
    file_cache_reused_ = file->reused();
    cache_ = std::move(file);
  }
  pinned_ = opt_.pin_memory;
  if (opt_.device.is_cuda()) {
    MDL_CHECK(cuda::compiled(), "DataLoader: option device = ", opt_.device,
              " needs the CUDA backend, but this build has none (CUDA=0)");
    MDL_CHECK(cuda::is_available(), "DataLoader: option device = ", opt_.device, ", but no GPU was found");
    MDL_CHECK(opt_.device.index == 0, "DataLoader: option device = ", opt_.device, ": only cuda:0 is supported");
    copies_ = std::make_unique<cuda::CopyStream>(opt_.device);
  }
}

DataLoader::~DataLoader() { stop_epoch(); }

int64_t DataLoader::size() const {
  const int64_t n = opt_.sampler ? opt_.sampler->size() : dataset_.size(), b = opt_.batch_size;
  return opt_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  if (opt_.sampler) {
    std::vector<int64_t> order = opt_.sampler->indices(epoch);
    MDL_CHECK(int64_t(order.size()) == opt_.sampler->size(), "DataLoader: the sampler gave ", order.size(),
              " indices for epoch ", epoch, " but its size() is ", opt_.sampler->size());
    for (int64_t i : order)
      MDL_CHECK(i >= 0 && i < dataset_.size(), "DataLoader: the sampler gave index ", i, " outside the dataset of ",
                dataset_.size(), " samples");
    return order;
  }
  std::vector<int64_t> order(size_t(dataset_.size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  if (opt_.shuffle) {
    Generator g = sample_generator(seed_ ^ kShuffleStream, epoch, -1);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(g.next_u64() % i)]);  // Fisher-Yates
  }
  return order;
}

DataLoader::Iterator DataLoader::begin() {
  start_epoch();
  Iterator it(this, serial_);
  advance();
  return it;
}

DataLoader::Iterator::~Iterator() {
  if (loader_ && loader_->serial_ == serial_) loader_->stop_epoch();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  MDL_CHECK(loader_ && loader_->serial_ == serial_,
            "DataLoader: iterator used after another begin() started a new epoch");
  MDL_CHECK(!loader_->at_end_, "DataLoader: iterator advanced past the end of the epoch");
  loader_->advance();
  return *this;
}

void DataLoader::start_epoch() {
  stop_epoch();
  epoch_ = next_epoch_++;
  order_ = epoch_order(epoch_);
  n_batches_ = size();
  next_take_ = next_claim_ = requested_ = 0;
  stop_ = false;
  done_.clear();
  at_end_ = false;
  running_ = true;
  ++serial_;
  epoch_start_ = Clock::now();
  try {
    for (int w = 0; w < opt_.num_workers; ++w) workers_.emplace_back(&DataLoader::worker_loop, this);
  } catch (const std::system_error& e) {
    stop_epoch();
    MDL_FAIL("DataLoader: cannot start ", opt_.num_workers, " worker threads: ", e.what());
  }
}

void DataLoader::stop_epoch() {
  if (!running_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  for (auto& [b, r] : done_) discard(r);
  done_.clear();
  running_ = false;
  at_end_ = true;
  epoch_seconds_ += seconds_since(epoch_start_);
  ++epochs_;
}

void DataLoader::advance() {
  while (next_take_ < n_batches_) {
    Result r = take(next_take_++);
    if (r.error) {
      stop_epoch();
      std::rethrow_exception(r.error);
    }
    if (r.empty) continue;
    if (copies_) {  // mdl's stream is ordered after the batch's copy before anyone can use it
      if (r.x_copy) r.batch.x = copies_->wait({std::move(r.batch.x), r.x_copy});
      if (r.y_copy) r.batch.y = copies_->wait({std::move(r.batch.y), r.y_copy});
    }
    current_ = std::move(r.batch);
    ++batches_;
    samples_ += current_.x.size(0);
    return;
  }
  stop_epoch();
  complete_file_cache();
}

// A file cache is kept only once it holds every index; a sampler that never visits some (the tail
// drop_last leaves) would leave it unfinished, removed at exit and rebuilt by every run. At an
// epoch's natural end, when fewer than a batch of indices are missing, they are loaded into it on
// this thread; one that fails is recorded as a failure, which a later run tries again. More (a
// rank's shard of an unshuffled DistributedSampler) would stall the run: the cache stays unkept.
void DataLoader::complete_file_cache() {
  auto* file = dynamic_cast<FileCache*>(cache_.get());
  if (!file) return;
  const std::vector<int64_t> missing = file->missing();
  if (int64_t(missing.size()) >= opt_.batch_size) return;
  for (int64_t index : missing) {
    try {
      file->store(index, decode(index));
    } catch (const CacheWriteError&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      file->store_failure(index, e.what());
    }
  }
}

DataLoader::Result DataLoader::take(int64_t b) {
  profiler::Phase data_wait(profiler::kDataWait);
  const auto t0 = Clock::now();
  if (opt_.num_workers == 0) {
    Result r = build(epoch_, b);
    wait_seconds_ += seconds_since(t0);
    return r;
  }
  std::unique_lock<std::mutex> lock(mu_);
  requested_ = b;
  work_cv_.notify_all();
  ready_cv_.wait(lock, [&] { return done_.count(b) > 0; });
  wait_seconds_ += seconds_since(t0);
  auto node = done_.extract(b);
  return std::move(node.mapped());
}

void DataLoader::worker_loop() {
  set_num_threads(opt_.worker_threads);  // this thread's OpenMP count starts at the process default
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Back-pressure: batch k is started only once the consumer has asked for k - prefetch.
    work_cv_.wait(lock,
                  [&] { return stop_ || next_claim_ >= n_batches_ || next_claim_ <= requested_ + opt_.prefetch; });
    if (stop_ || next_claim_ >= n_batches_) return;
    const int64_t b = next_claim_++;
    lock.unlock();
    Result r = build(epoch_, b);
    lock.lock();
    done_.emplace(b, std::move(r));
    ready_cv_.notify_all();
  }
}

DataLoader::Result DataLoader::build(int64_t epoch, int64_t b) {
  Result r;
  try {
    const int64_t first = b * opt_.batch_size;
    const int64_t last = std::min<int64_t>(first + opt_.batch_size, int64_t(order_.size()));
    std::vector<Sample> samples;
    std::vector<int64_t> kept;
    for (int64_t k = first; k < last; ++k) {
      if (stop_.load(std::memory_order_relaxed)) return r;  // the epoch was stopped: nobody takes this batch
      const int64_t index = order_[size_t(k)];
      try {
        samples.push_back(load(epoch, index));
        kept.push_back(index);
      } catch (const CacheWriteError&) {
        throw;  // the cache failed, not the sample: never skipped
      } catch (const std::bad_alloc&) {
        throw;                             // out of memory: not the sample's fault either
      } catch (const std::exception& e) {  // mdl::Error, or a dataset's own (std::out_of_range, ...)
        if (opt_.on_error == OnError::Skip) {
          ++skipped_;
          continue;
        }
        MDL_FAIL("DataLoader: sample ", index, " (batch ", b, " of epoch ", epoch, "): ", e.what());
      }
    }
    if (samples.empty()) r.empty = true;
    else r.batch = collate(samples, kept, pinned_);
    if (copies_ && !r.empty) {  // on the side stream, on this (producing) thread
      for (auto [t, ticket] : {std::pair{&r.batch.x, &r.x_copy}, std::pair{&r.batch.y, &r.y_copy}}) {
        if (!t->defined()) continue;
        cuda::CopyStream::Copy c = copies_->copy(*t);
        *t = std::move(c.tensor);
        *ticket = c.ticket;
      }
    }
  } catch (...) {
    discard(r);
    r.error = std::current_exception();
  }
  return r;
}

void DataLoader::discard(Result& r) {
  for (uint64_t* ticket : {&r.x_copy, &r.y_copy})
    if (*ticket) copies_->release(std::exchange(*ticket, 0));
}

Sample DataLoader::decode(int64_t index) const {
  Sample s = dataset_.get(index);
  if (opt_.before_cache) s.x = opt_.before_cache->apply(s.x);
  return s;
}

Sample DataLoader::load(int64_t epoch, int64_t index) {
  const int64_t bytes_before = thread_bytes_read();
  Sample s;
  std::optional<Sample> cached = cache_ ? cache_->lookup(index) : std::nullopt;
  if (cached) {
    ++cache_hits_;
    s = std::move(*cached);
  } else {
    if (cache_) ++cache_misses_;
    try {
      s = decode(index);
    } catch (const Error& e) {
      if (cache_ && opt_.on_error == OnError::Skip) cache_->store_failure(index, e.what());
      throw;
    }
    if (cache_) cache_->store(index, s);
  }
  bytes_read_ += thread_bytes_read() - bytes_before;
  if (opt_.transform) {
    Generator g = sample_generator(seed_, epoch, index);
    s.x = (*opt_.transform)(s.x, g);
  } else if (s.x.defined() && s.x.dtype() == kU8 && (s.x.dim() == 2 || s.x.dim() == 3)) {
    static const ToTensor to_tensor;
    s.x = to_tensor.apply(s.x);
  }
  return s;
}

LoaderStats DataLoader::stats() const {
  LoaderStats s;
  s.wait_seconds = wait_seconds_;
  s.epoch_seconds = epoch_seconds_ + (running_ ? seconds_since(epoch_start_) : 0.0);
  s.epochs = epochs_;
  s.batches = batches_;
  s.samples = samples_;
  s.cache_hits = cache_hits_;
  s.cache_misses = cache_misses_;
  s.bytes_read = bytes_read_;
  s.skipped = skipped_;
  s.pinned = pinned_ && pinned_memory_available();
  s.file_cache_reused = file_cache_reused_;
  s.device_copies_in_flight = copies_ ? copies_->in_flight() : 0;
  return s;
}

void DataLoader::reset_stats() {
  wait_seconds_ = epoch_seconds_ = 0;
  epochs_ = batches_ = samples_ = 0;
  cache_hits_ = cache_misses_ = bytes_read_ = skipped_ = 0;
  if (running_) epoch_start_ = Clock::now();
}

}  // namespace mdl::data
