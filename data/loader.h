// DataLoader: a dataset into batches. Workers (std::thread) load, decode, transform and collate
// whole batches in parallel; a bounded window of `prefetch` batches ahead of the consumer gives
// back-pressure; batches are delivered in order, and their content depends on (seed, epoch,
// index) only, never on the number of workers or timing. Caches sit before random transforms.
//
//   data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .num_workers = 2,
//                                   .prefetch = 4, .cache = data::Cache::Memory});
//   for (auto& [x, y] : loader) { ... }
//
// The loader keeps a reference to the dataset, which must outlive it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/cache.h"
#include "data/collate.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"

namespace mdl::cuda {
class CopyStream;
}

namespace mdl::data {

enum class OnError : uint8_t { Raise, Skip };

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;    // a new permutation each epoch, from (seed, epoch)
  bool drop_last = false;  // drop the last, smaller batch
  int num_workers = 0;     // 0: load in the consumer's thread
  int prefetch = 2;        // batches prepared ahead of the one asked for (with workers)
  // OpenMP threads in each worker (for transforms and collation); the consumer's own count does
  // not reach threads the loader starts. 1, as PyTorch sets in its workers: the workers run
  // beside the training step, which has the cores.
  int worker_threads = 1;
  Cache cache = Cache::None;   // None, Memory, or File (under cache_dir)
  std::string cache_dir = {};  // default: default_cache_dir(), a private per-user folder
  bool pin_memory = false;     // batch buffers in page-locked memory (when CUDA and a GPU are present)
  // Where batches are handed out. A CUDA device: each collated batch is copied there on a side
  // stream as it is built, and mdl's stream waits on the copy's event when the batch is handed
  // out, so the copy of the next batches overlaps compute on this one (use with pin_memory).
  Device device = Device::cpu();
  OnError on_error = OnError::Raise;  // Skip: leave bad samples out of their batch and count them
  std::optional<uint64_t> seed = {};  // default: the seed of the default generator (manual_seed)
  // Chooses each epoch's indices instead of the loader (e.g. DistributedSampler); not with shuffle.
  std::shared_ptr<const Sampler> sampler = nullptr;
  // Deterministic transform applied before caching (e.g. Resize); part of the file-cache key.
  TransformPtr before_cache = nullptr;
  // Applied after the cache, with a generator seeded from (seed, epoch, index). When null, u8
  // images go through ToTensor() (f32 CHW in [0, 1]) and other samples pass unchanged.
  TransformPtr transform = nullptr;
};

// What the loader measured, summed over epochs since construction or reset_stats().
struct LoaderStats {
  double wait_seconds = 0;   // the consumer blocked waiting for a batch (or loading it, without workers)
  double epoch_seconds = 0;  // wall time from begin() to the end of each epoch
  int64_t epochs = 0;
  int64_t batches = 0;
  int64_t samples = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  int64_t bytes_read = 0;               // from files: images, cache files
  int64_t skipped = 0;                  // bad samples left out (on_error = Skip)
  bool pinned = false;                  // batches are in page-locked memory
  bool file_cache_reused = false;       // the file cache was complete when opened (an earlier run built it)
  int64_t device_copies_in_flight = 0;  // batches copied to options.device, not yet handed out
  double wait_fraction() const { return epoch_seconds > 0 ? wait_seconds / epoch_seconds : 0.0; }
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, LoaderOptions options = {});
  ~DataLoader();  // stops and joins the workers
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Owns the epoch: destroying it (a finished loop, a break, an exception) stops the workers.
  class Iterator {
   public:
    Iterator(Iterator&& o) noexcept : loader_(std::exchange(o.loader_, nullptr)), serial_(o.serial_) {}
    Iterator& operator=(Iterator&&) = delete;
    ~Iterator();
    Batch& operator*() const { return loader_->current_; }
    Batch* operator->() const { return &loader_->current_; }
    Iterator& operator++();
    bool operator==(std::default_sentinel_t) const {
      return !loader_ || loader_->serial_ != serial_ || loader_->at_end_;
    }

   private:
    friend class DataLoader;
    Iterator(DataLoader* l, uint64_t serial) : loader_(l), serial_(serial) {}
    DataLoader* loader_;
    uint64_t serial_;  // which begin() made it
  };

  // Starts the next epoch (stopping one still running) and returns its first batch. Stopping an
  // epoch (a break) returns once each worker has finished the sample it is loading.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  int64_t size() const;                          // batches per epoch
  int64_t epoch() const { return next_epoch_; }  // the epoch the next begin() runs
  void set_epoch(int64_t e) { next_epoch_ = e; }
  uint64_t seed() const { return seed_; }
  const LoaderOptions& options() const { return opt_; }
  LoaderStats stats() const;
  void reset_stats();
  // The dataset indices in the order `epoch` visits them (batch b is [b * batch_size, ...)).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  struct Result {
    Batch batch;
    std::exception_ptr error;
    bool empty = false;               // every sample skipped
    uint64_t x_copy = 0, y_copy = 0;  // the device copies' tickets (options.device CUDA)
  };

  void start_epoch();
  void stop_epoch();
  void advance();  // fetches the next batch into current_, or sets at_end_
  // Loads what the file cache lacks after an epoch that left a few indices unvisited.
  void complete_file_cache();
  Result take(int64_t b);
  Result build(int64_t epoch, int64_t b);
  void discard(Result& r);  // gives back the device copies of a batch that will not be handed out
  Sample load(int64_t epoch, int64_t index);
  Sample decode(int64_t index) const;  // the dataset's sample, through before_cache: what the cache keeps
  void worker_loop();

  const Dataset& dataset_;
  LoaderOptions opt_;
  uint64_t seed_;
  std::unique_ptr<SampleCache> cache_;
  std::unique_ptr<cuda::CopyStream> copies_;  // options.device CUDA
  bool pinned_ = false;
  bool file_cache_reused_ = false;

  // The running epoch.
  int64_t epoch_ = 0, next_epoch_ = 0, n_batches_ = 0, next_take_ = 0;
  std::vector<int64_t> order_;
  Batch current_;
  bool at_end_ = true, running_ = false;
  uint64_t serial_ = 0;
  std::chrono::steady_clock::time_point epoch_start_;

  // Shared with the workers, under mu_.
  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  int64_t next_claim_ = 0, requested_ = 0;
  std::atomic<bool> stop_{false};  // also read by workers between samples
  std::map<int64_t, Result> done_;
  std::vector<std::thread> workers_;

  // Statistics.
  std::atomic<int64_t> cache_hits_{0}, cache_misses_{0}, bytes_read_{0}, skipped_{0};
  double wait_seconds_ = 0, epoch_seconds_ = 0;
  int64_t epochs_ = 0, batches_ = 0, samples_ = 0;
};

}  // namespace mdl::data
