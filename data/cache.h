// Sample caches for the DataLoader. The memory cache keeps decoded samples after their first
// load; the file cache writes them to one file under a cache folder, named by a hash of the
// dataset's identity (paths, sizes, mtimes, the transform applied before caching), so a later
// run reuses it and a changed source gets a new one. Both sit before random transforms. A sample
// the dataset could not load (with on_error = Skip) is remembered as a failure, so later epochs
// and runs skip it without reading it again and a file cache still completes.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

enum class Cache : uint8_t { None, Memory, File };

class SampleCache {
 public:
  virtual ~SampleCache() = default;
  // Thread-safe; lookups of one index never race with its store (the loader loads each index
  // once per epoch). lookup() throws mdl::Error with the remembered message for a failed index.
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
  std::vector<Sample> slots_;
  std::vector<std::string> failures_;  // non-empty: the index failed to load
  std::unique_ptr<std::atomic<bool>[]> ready_;
};

// One file per key: records appended as samples arrive (to "<key>.mdlcache.partial-<pid>-<n>"),
// then, once every index is stored, an index and a footer are written and the file is renamed
// to "<key>.mdlcache". An unfinished file is removed when the cache is destroyed.
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
  bool reused() const { return reused_; }  // opened a complete file left by an earlier run
  const std::string& path() const { return final_path_; }

 private:
  bool open_existing();
  void append(int64_t index, const std::string& record);
  void finish();  // under mu_

  std::string final_path_, partial_path_;
  uint64_t key_hash_;
  int64_t size_;
  int fd_ = -1;
  bool reused_ = false;
  mutable std::mutex mu_;
  std::vector<int64_t> offsets_, lengths_;  // -1: not stored yet
  int64_t stored_ = 0, end_ = 0;
  bool complete_ = false;
};

// Sample to bytes and back (a kind byte 'S', then dtype, shape, contiguous data for x then y).
// `where` names the file and offset in errors.
std::string serialize_sample(const Sample& s);
Sample deserialize_sample(const uint8_t* p, size_t n, const std::string& where);

}  // namespace mdl::data
