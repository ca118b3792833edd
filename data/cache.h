// Sample caches for the DataLoader. The memory cache keeps decoded samples after their first
// load; the file cache writes them to one file under a cache folder, named by a hash of the
// dataset's identity (paths, sizes, mtimes, the transform applied before caching), so a later
// run reuses it and a changed source gets a new one. Both sit before random transforms.
//
// Failures. A sample the dataset could not load (with on_error = Skip) is remembered for the rest
// of the run, so later epochs skip it without reading it again; a new run tries it once more, as
// PyTorch would, since the failure may have passed (a network file system, too many open files).
// A corrupt source file keeps failing; repairing it changes the dataset's identity and so the
// cache. A failure of the cache itself (a full disk) is a CacheWriteError, never a skipped sample.
//
// Trust. The file cache never returns a sample it cannot read back intact: each record carries a
// CRC-32 in the index, and a record that does not match, or does not parse, is a cache miss (the
// loader loads the sample from the dataset again) and the file is rebuilt by the next run.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/dataset.h"
#include "tensor/error.h"

namespace mdl::data {

enum class Cache : uint8_t { None, Memory, File };

// The cache could not write (a full disk, a removed folder): not the sample's fault, so the loader
// raises it even with on_error = Skip.
class CacheWriteError : public Error {
 public:
  using Error::Error;
};

class SampleCache {
 public:
  virtual ~SampleCache() = default;
  // Thread-safe, also for one index from several threads (a sampler may repeat indices): the first
  // store of an index wins. lookup() throws mdl::Error with the remembered message for an index
  // that failed in this run.
  virtual std::optional<Sample> lookup(int64_t index) = 0;
  virtual void store(int64_t index, const Sample& sample) = 0;
  virtual void store_failure(int64_t index, const std::string& what) = 0;
};

class MemoryCache : public SampleCache {
 public:
  explicit MemoryCache(int64_t size);
  std::optional<Sample> lookup(int64_t index) override;
  void store(int64_t index, const Sample& sample) override;
  void store_failure(int64_t index, const std::string& what) override;

 private:
  enum State : uint8_t { kEmpty, kWriting, kReady };
  bool claim(int64_t index);  // kEmpty -> kWriting; false when another store came first

  std::vector<Sample> slots_;
  std::vector<std::string> failures_;  // non-empty: the index failed to load
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
};

// The default cache folder, private to the user: $XDG_CACHE_HOME/mdl, else $HOME/.cache/mdl.
// Created with mode 0700; an existing one must be a folder owned by the user that no one else may
// write to, else mdl::Error naming it.
std::string default_cache_dir();

// One file per key, "<hash of key>.mdlcache". Records are appended as samples arrive to a partial
// file ("<name>.partial-<pid>-<random>", created exclusively, mode 0600); once every index is
// stored, an index (offset, length, CRC-32 per record) and a footer are written, the file is
// synced and renamed into place, and the folder is synced. An unfinished file is removed when the
// cache is destroyed. The writer holds an flock on its partial file while it lives; partial files
// left by dead processes, or untouched for an hour, are removed when a cache opens in the folder,
// unless their lock is held (a writer in another PID namespace or on another host, or an idle
// one). Links are never followed.
class FileCache : public SampleCache {
 public:
  FileCache(const std::string& dir, const std::string& key, int64_t size);
  ~FileCache() override;
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  std::optional<Sample> lookup(int64_t index) override;
  void store(int64_t index, const Sample& sample) override;
  void store_failure(int64_t index, const std::string& what) override;

  bool complete() const;                   // every sample is in the file
  std::vector<int64_t> missing() const;    // the indices not stored yet, in order
  bool reused() const { return reused_; }  // opened a complete file left by an earlier run
  const std::string& path() const { return final_path_; }

 private:
  struct Entry {
    int64_t offset = -1;  // -1: not stored yet
    int64_t length = 0;
    uint32_t crc = 0;
    bool retried = false;  // an earlier run's failure record, tried again in this run
  };
  bool open_existing();
  std::optional<std::vector<Entry>> read_index(int fd, int64_t file_size) const;
  void append(int64_t index, const std::string& record);
  void finish();  // under mu_

  std::string dir_, final_path_, partial_path_;
  uint64_t key_hash_;
  int64_t size_;
  int fd_ = -1;
  bool reused_ = false;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::unordered_map<int64_t, std::string> failures_;  // this run's failed indices
  int64_t stored_ = 0, end_ = 0;
  bool complete_ = false;
  bool stale_ = false;  // a complete file with a damaged record or an outdated failure: rebuilt next run
};

// Sample to bytes and back (a kind byte 'S', then dtype, shape, contiguous data for x then y).
// `where` names the file and offset in errors.
std::string serialize_sample(const Sample& s);
Sample deserialize_sample(const uint8_t* p, size_t n, const std::string& where);

}  // namespace mdl::data
