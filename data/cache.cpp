// The memory cache (a slot per index with a three-state flag) and the file cache (append-only
// records, then an index and a footer; synced and renamed into place when complete). A file cache
// record is a sample ('S' + tensors) or a failure ('E' + the error message); the index holds each
// record's offset, length and CRC-32, and the footer the index's own CRC-32.
#include "data/cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "data/file_util.h"
#include "tensor/checked_size.h"

namespace mdl::data {

MemoryCache::MemoryCache(int64_t size)
    : slots_(size_t(size)), failures_(size_t(size)), state_(new std::atomic<uint8_t>[size_t(size)]) {
  for (int64_t i = 0; i < size; ++i) state_[size_t(i)].store(kEmpty, std::memory_order_relaxed);
}

// One writer per slot: whoever moves it from kEmpty to kWriting; lookups read only kReady slots.
bool MemoryCache::claim(int64_t index) {
  uint8_t expected = kEmpty;
  return state_[size_t(index)].compare_exchange_strong(expected, kWriting, std::memory_order_acquire);
}

std::optional<Sample> MemoryCache::lookup(int64_t index) {
  if (state_[size_t(index)].load(std::memory_order_acquire) != kReady) return std::nullopt;
  if (!failures_[size_t(index)].empty()) MDL_FAIL(failures_[size_t(index)], " (remembered by the memory cache)");
  return slots_[size_t(index)];
}

void MemoryCache::store(int64_t index, const Sample& sample) {
  if (!claim(index)) return;
  slots_[size_t(index)] = sample;
  state_[size_t(index)].store(kReady, std::memory_order_release);
}

void MemoryCache::store_failure(int64_t index, const std::string& what) {
  if (!claim(index)) return;
  failures_[size_t(index)] = what.empty() ? "failed to load" : what;
  state_[size_t(index)].store(kReady, std::memory_order_release);
}

std::string default_cache_dir() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg && *xdg) base = xdg;
  else if (home && *home) base = fs::path(home) / ".cache";
  else MDL_FAIL("FileCache: neither XDG_CACHE_HOME nor HOME is set; name a cache folder (cache_dir)");
  const std::string dir = (base / "mdl").string();
  std::error_code ec;
  fs::create_directories(base, ec);
  MDL_CHECK(!ec, "FileCache: cannot create the folder '", base.string(), "': ", ec.message());
  MDL_CHECK(::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, "FileCache: cannot create the cache folder '", dir,
            "': ", std::strerror(errno));
  struct stat st {};
  MDL_CHECK(::lstat(dir.c_str(), &st) == 0, "FileCache: cannot stat the cache folder '", dir,
            "': ", std::strerror(errno));
  MDL_CHECK(S_ISDIR(st.st_mode), "FileCache: the cache folder '", dir, "' is not a folder");
  MDL_CHECK(st.st_uid == ::geteuid(), "FileCache: the cache folder '", dir, "' belongs to user ", st.st_uid,
            ", not to this user (", ::geteuid(), ")");
  MDL_CHECK((st.st_mode & (S_IWGRP | S_IWOTH)) == 0, "FileCache: the cache folder '", dir,
            "' may be written by other users (mode ", std::oct, (st.st_mode & 07777), std::dec,
            "); make it private (chmod 700) or remove it");
  return dir;
}

namespace {

constexpr char kMagic[8] = {'M', 'D', 'L', 'C', 'A', 'C', 'H', 'E'};
constexpr uint64_t kVersion = 3;       // 2: records start with a kind byte; 3: CRC-32s in the index and footer
constexpr int64_t kEntryBytes = 24;    // offset, length, CRC-32 (as u64)
constexpr size_t kFooter = 8 + 5 * 8;  // magic, version, count, index offset, key hash, index CRC-32
constexpr int64_t kStaleSeconds = 3600;

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

uint64_t get_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t crc_of(const void* data, size_t n) {
  return uint32_t(crc32_z(crc32_z(0, nullptr, 0), static_cast<const Bytef*>(data), n));
}

void put_tensor(std::string& s, const Tensor& t) {
  Tensor c = t.contiguous();
  s += char(c.dtype());
  s += char(c.dim());
  for (int64_t d : c.shape()) put_u64(s, uint64_t(d));
  s.append(static_cast<const char*>(c.raw_data()), c.nbytes());
}

Tensor get_tensor(const uint8_t*& p, const uint8_t* end, const std::string& where) {
  MDL_CHECK(end - p >= 2, "FileCache: ", where, ": record truncated");
  const auto dtype = DType(p[0]);
  const int dim = p[1];
  MDL_CHECK(uint8_t(dtype) <= uint8_t(DType::Bool) && dim <= 8, "FileCache: ", where, ": corrupt record header");
  p += 2;
  MDL_CHECK(end - p >= 8 * dim, "FileCache: ", where, ": record truncated");
  Shape shape;
  for (int d = 0; d < dim; ++d, p += 8) shape.push_back(int64_t(get_u64(p)));
  const std::optional<int64_t> numel = numel_if_fits(shape);  // empty for a negative dim too
  const std::optional<int64_t> nbytes = numel ? checked_mul(*numel, int64_t(dtype_size(dtype))) : std::nullopt;
  MDL_CHECK(nbytes, "FileCache: ", where, ": corrupt record shape ", shape_str(shape));
  MDL_CHECK(end - p >= *nbytes, "FileCache: ", where, ": record truncated");
  Tensor t = make_tensor(shape, dtype, Device::cpu());
  std::memcpy(t.raw_data(), p, size_t(*nbytes));
  p += *nbytes;
  return t;
}

void pwrite_all(int fd, const void* data, size_t n, int64_t offset, const std::string& path) {
  const auto* b = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, b, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw CacheWriteError(detail::concat("FileCache: cannot write '", path, "' at offset ", offset, ": ",
                                           w < 0 ? std::strerror(errno) : "no progress"));
    b += w;
    n -= size_t(w);
    offset += w;
  }
}

bool pread_all(int fd, void* data, size_t n, int64_t offset) {
  auto* b = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd, b, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
    offset += r;
  }
  return true;
}

void sync_or_throw(int fd, const std::string& path) {
  if (::fsync(fd) != 0)
    throw CacheWriteError(detail::concat("FileCache: cannot sync '", path, "': ", std::strerror(errno)));
}

// "<8 random bytes in hex>": partial file names no other user can predict.
std::string random_tag() {
  std::random_device rd;
  return hex64((uint64_t(rd()) << 32) ^ rd());
}

// Whether another open file holds the flock a writer keeps on its partial file while it lives.
// The pid in the name cannot tell: the writer may be in another PID namespace or on another host
// sharing the folder, or idle for an hour. A file that cannot be opened, or a filesystem without
// flock, gives false.
bool writer_holds(const std::filesystem::path& partial) {
  const int fd = ::open(partial.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

// Removes "*.mdlcache.partial-<pid>-<tag>" files whose process is gone or that nobody has written
// to for an hour, unless their writer still holds its lock: what a killed run leaves behind.
void sweep_partials(const std::string& dir) {
  const std::string marker = ".mdlcache.partial-";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.find(marker);
    if (at == std::string::npos) continue;
    const long long pid = std::atoll(name.c_str() + at + marker.size());
    const bool dead = pid > 0 && pid <= INT32_MAX && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    const bool untouched = std::time(nullptr) - st.st_mtime > kStaleSeconds;
    if ((dead || untouched) && !writer_holds(e.path())) ::unlink(e.path().c_str());
  }
}

}  // namespace

std::string serialize_sample(const Sample& s) {
  std::string out = "S";
  put_tensor(out, s.x);
  put_tensor(out, s.y);
  return out;
}

Sample deserialize_sample(const uint8_t* p, size_t n, const std::string& where) {
  const uint8_t* end = p + n;
  MDL_CHECK(n >= 1 && p[0] == 'S', "FileCache: ", where, ": not a sample record");
  ++p;
  Sample s;
  s.x = get_tensor(p, end, where);
  s.y = get_tensor(p, end, where);
  MDL_CHECK(p == end, "FileCache: ", where, ": record has ", end - p, " extra bytes");
  return s;
}

FileCache::FileCache(const std::string& dir, const std::string& key, int64_t size)
    : dir_(dir), key_hash_(fnv1a(key)), size_(size), entries_(size_t(size)) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MDL_CHECK(!ec, "FileCache: cannot create cache folder '", dir, "': ", ec.message());
  sweep_partials(dir);
  final_path_ = (std::filesystem::path(dir) / (hex64(key_hash_) + ".mdlcache")).string();
  if (open_existing()) return;
  const std::string prefix = final_path_ + ".partial-" + std::to_string(::getpid()) + "-";
  for (int attempt = 0; fd_ < 0 && attempt < 8; ++attempt) {
    partial_path_ = prefix + random_tag();
    fd_ = ::open(partial_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  MDL_CHECK(fd_ >= 0, "FileCache: cannot create '", partial_path_, "': ", std::strerror(errno));
  ::flock(fd_, LOCK_EX | LOCK_NB);  // a new file: no one else holds it; without flock, the sweep's rules alone
  if (size_ == 0) finish();
}

// The index of a complete file, checked against the file: every size is checked before it is
// used, and the index's CRC-32 must match the footer's. Empty when anything does not fit.
std::optional<std::vector<FileCache::Entry>> FileCache::read_index(int fd, int64_t file_size) const {
  uint8_t footer[kFooter];
  if (file_size < int64_t(kFooter) || !pread_all(fd, footer, kFooter, file_size - int64_t(kFooter)))
    return std::nullopt;
  if (std::memcmp(footer, kMagic, 8) != 0 || get_u64(footer + 8) != kVersion ||
      get_u64(footer + 16) != uint64_t(size_) || get_u64(footer + 32) != key_hash_)
    return std::nullopt;
  const auto index_at = int64_t(get_u64(footer + 24));
  const std::optional<int64_t> index_bytes = checked_mul(size_, kEntryBytes);
  const std::optional<int64_t> index_end = index_at >= 0 && index_bytes ? checked_add(index_at, *index_bytes)
                                                                        : std::nullopt;
  if (!index_end || *index_end != file_size - int64_t(kFooter)) return std::nullopt;
  std::vector<uint8_t> raw(static_cast<size_t>(*index_bytes));
  if (!pread_all(fd, raw.data(), raw.size(), index_at) || crc_of(raw.data(), raw.size()) != get_u64(footer + 40))
    return std::nullopt;
  std::vector<Entry> entries(static_cast<size_t>(size_));
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint8_t* p = raw.data() + i * kEntryBytes;
    Entry& e = entries[i];
    e.offset = int64_t(get_u64(p));
    e.length = int64_t(get_u64(p + 8));
    e.crc = uint32_t(get_u64(p + 16));
    const std::optional<int64_t> record_end = e.offset >= 0 && e.length >= 1 ? checked_add(e.offset, e.length)
                                                                             : std::nullopt;
    if (!record_end || *record_end > index_at) return std::nullopt;
  }
  return entries;
}

// Opens a complete cache file; false (and the file removed) when it is absent or not valid.
bool FileCache::open_existing() {
  // O_NOFOLLOW: a link planted at the name is not read; O_NONBLOCK: a FIFO there cannot block.
  const int fd = ::open(final_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  std::optional<std::vector<Entry>> entries;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) entries = read_index(fd, int64_t(st.st_size));
  if (!entries) {
    ::close(fd);
    ::unlink(final_path_.c_str());  // stale or damaged: rebuilt from the source
    return false;
  }
  entries_ = std::move(*entries);
  fd_ = fd;
  stored_ = size_;
  complete_ = reused_ = true;
  return true;
}

FileCache::~FileCache() {
  if (stale_) {  // removed only if the name still holds this file (another run may have replaced it)
    struct stat mine {
    }, now{};
    if (::fstat(fd_, &mine) == 0 && ::lstat(final_path_.c_str(), &now) == 0 && mine.st_dev == now.st_dev &&
        mine.st_ino == now.st_ino)
      ::unlink(final_path_.c_str());
  }
  if (fd_ >= 0) ::close(fd_);
  if (!complete_ && !partial_path_.empty()) ::unlink(partial_path_.c_str());
}

bool FileCache::complete() const {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_;
}

std::vector<int64_t> FileCache::missing() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  if (complete_) return out;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].offset < 0) out.push_back(int64_t(i));
  return out;
}

std::optional<Sample> FileCache::lookup(int64_t index) {
  Entry e;
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto f = failures_.find(index); f != failures_.end())
      MDL_FAIL(f->second, " (remembered by the file cache '", final_path_, "')");
    e = entries_[size_t(index)];
    if (e.offset < 0) return std::nullopt;
    path = complete_ ? final_path_ : partial_path_;
  }
  // The length was checked against the file's size when the file was opened or the record written.
  std::vector<uint8_t> bytes(size_t(e.length));
  const bool intact = pread_all(fd_, bytes.data(), bytes.size(), e.offset) &&
                      crc_of(bytes.data(), bytes.size()) == e.crc;
  if (intact && bytes[0] == 'E') {  // a failure of an earlier run: this run tries the sample again
    std::lock_guard<std::mutex> lock(mu_);
    entries_[size_t(index)].retried = true;
    return std::nullopt;
  }
  if (intact) {
    try {
      Sample s = deserialize_sample(bytes.data(), bytes.size(), "'" + path + "' at offset " + std::to_string(e.offset));
      thread_bytes_read() += e.length;
      return s;
    } catch (const Error&) {  // a record with a valid CRC that does not parse: treated as damaged
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stale_ = true;  // the loader loads the sample from the dataset; the next run rebuilds the file
  return std::nullopt;
}

void FileCache::store(int64_t index, const Sample& sample) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_[size_t(index)].retried) stale_ = true;  // an earlier run's failure did not repeat
  }
  append(index, serialize_sample(sample));
}

void FileCache::store_failure(int64_t index, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    failures_.emplace(index, what.empty() ? "failed to load" : what);
  }
  append(index, "E" + what);  // so the file completes; a later run tries the sample again
}

void FileCache::append(int64_t index, const std::string& record) {
  std::lock_guard<std::mutex> lock(mu_);
  if (complete_ || entries_[size_t(index)].offset >= 0) return;
  const std::optional<int64_t> end = checked_add(end_, int64_t(record.size()));
  if (!end)
    throw CacheWriteError(detail::concat("FileCache: '", partial_path_, "' would exceed the largest file size"));
  pwrite_all(fd_, record.data(), record.size(), end_, partial_path_);
  entries_[size_t(index)] = {end_, int64_t(record.size()), crc_of(record.data(), record.size())};
  end_ = *end;
  if (++stored_ == size_) finish();
}

void FileCache::finish() {
  std::string index;
  for (const Entry& e : entries_) {
    put_u64(index, uint64_t(e.offset));
    put_u64(index, uint64_t(e.length));
    put_u64(index, e.crc);
  }
  std::string footer(kMagic, 8);
  put_u64(footer, kVersion);
  put_u64(footer, uint64_t(size_));
  put_u64(footer, uint64_t(end_));
  put_u64(footer, key_hash_);
  put_u64(footer, crc_of(index.data(), index.size()));
  const std::string tail = index + footer;
  pwrite_all(fd_, tail.data(), tail.size(), end_, partial_path_);
  sync_or_throw(fd_, partial_path_);  // the data is on disk before the name says it is complete
  if (::rename(partial_path_.c_str(), final_path_.c_str()) != 0)
    throw CacheWriteError(detail::concat("FileCache: cannot rename '", partial_path_, "' to '", final_path_,
                                         "': ", std::strerror(errno)));
  complete_ = true;
  const int dir = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // and the rename is too
  if (dir >= 0) {
    const bool synced = ::fsync(dir) == 0;
    const int err = errno;
    ::close(dir);
    if (!synced)
      throw CacheWriteError(detail::concat("FileCache: cannot sync the folder '", dir_, "': ", std::strerror(err)));
  }
}

}  // namespace mdl::data
