// The memory cache (a slot per index with a ready flag) and the file cache (append-only records,
// then an index and a footer; renamed into place when complete). A file cache record is a sample
// ('S' + tensors) or a remembered failure ('E' + the error message).
#include "data/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "data/file_util.h"
#include "tensor/checked_size.h"
#include "tensor/error.h"

namespace mdl::data {

MemoryCache::MemoryCache(int64_t size)
    : slots_(size_t(size)), failures_(size_t(size)), ready_(new std::atomic<bool>[size_t(size)]) {
  for (int64_t i = 0; i < size; ++i) ready_[size_t(i)].store(false, std::memory_order_relaxed);
}

std::optional<Sample> MemoryCache::lookup(int64_t index) {
  if (!ready_[size_t(index)].load(std::memory_order_acquire)) return std::nullopt;
  if (!failures_[size_t(index)].empty()) MDL_FAIL(failures_[size_t(index)], " (remembered by the memory cache)");
  return slots_[size_t(index)];
}

void MemoryCache::store(int64_t index, const Sample& sample) {
  if (ready_[size_t(index)].load(std::memory_order_acquire)) return;
  slots_[size_t(index)] = sample;
  ready_[size_t(index)].store(true, std::memory_order_release);
}

void MemoryCache::store_failure(int64_t index, const std::string& what) {
  if (ready_[size_t(index)].load(std::memory_order_acquire)) return;
  failures_[size_t(index)] = what.empty() ? "failed to load" : what;
  ready_[size_t(index)].store(true, std::memory_order_release);
}

namespace {

constexpr char kMagic[8] = {'M', 'D', 'L', 'C', 'A', 'C', 'H', 'E'};
constexpr uint64_t kVersion = 2;       // 2: records start with a kind byte
constexpr size_t kFooter = 8 + 4 * 8;  // magic, version, count, index offset, key hash

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

uint64_t get_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
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
    MDL_CHECK(w > 0, "FileCache: cannot write '", path, "' at offset ", offset, ": ", std::strerror(errno));
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
    : key_hash_(fnv1a(key)), size_(size), offsets_(size_t(size), -1), lengths_(size_t(size), -1) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MDL_CHECK(!ec, "FileCache: cannot create cache folder '", dir, "': ", ec.message());
  final_path_ = (std::filesystem::path(dir) / (hex64(key_hash_) + ".mdlcache")).string();
  if (open_existing()) return;
  static std::atomic<int> counter{0};
  partial_path_ = final_path_ + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  fd_ = ::open(partial_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MDL_CHECK(fd_ >= 0, "FileCache: cannot create '", partial_path_, "': ", std::strerror(errno));
  if (size_ == 0) finish();
}

// Opens a complete cache file; false (and the file removed) when it is absent or not valid.
bool FileCache::open_existing() {
  int fd = ::open(final_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  uint8_t footer[kFooter];
  bool ok = ::fstat(fd, &st) == 0 && size_t(st.st_size) >= kFooter &&
            pread_all(fd, footer, kFooter, int64_t(st.st_size) - int64_t(kFooter)) &&
            std::memcmp(footer, kMagic, 8) == 0 && get_u64(footer + 8) == kVersion &&
            get_u64(footer + 16) == uint64_t(size_) && get_u64(footer + 32) == key_hash_;
  const int64_t index_at = ok ? int64_t(get_u64(footer + 24)) : 0;
  ok = ok && index_at >= 0 && index_at + 16 * size_ + int64_t(kFooter) == int64_t(st.st_size);
  std::vector<uint64_t> index(size_t(2 * size_));
  ok = ok && pread_all(fd, index.data(), index.size() * 8, index_at);
  for (int64_t i = 0; ok && i < size_; ++i) {
    offsets_[size_t(i)] = int64_t(index[size_t(2 * i)]);
    lengths_[size_t(i)] = int64_t(index[size_t(2 * i + 1)]);
    ok = offsets_[size_t(i)] >= 0 && lengths_[size_t(i)] >= 0 && offsets_[size_t(i)] + lengths_[size_t(i)] <= index_at;
  }
  if (!ok) {
    ::close(fd);
    ::unlink(final_path_.c_str());  // stale or damaged: rebuilt from the source
    std::fill(offsets_.begin(), offsets_.end(), -1);
    std::fill(lengths_.begin(), lengths_.end(), -1);
    return false;
  }
  fd_ = fd;
  stored_ = size_;
  complete_ = reused_ = true;
  return true;
}

FileCache::~FileCache() {
  if (fd_ >= 0) ::close(fd_);
  if (!complete_ && !partial_path_.empty()) ::unlink(partial_path_.c_str());
}

bool FileCache::complete() const {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_;
}

std::optional<Sample> FileCache::lookup(int64_t index) {
  int64_t offset, length;
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    offset = offsets_[size_t(index)];
    length = lengths_[size_t(index)];
    if (offset < 0) return std::nullopt;
    path = complete_ ? final_path_ : partial_path_;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(length));
  errno = 0;
  MDL_CHECK(pread_all(fd_, bytes.data(), bytes.size(), offset), "FileCache: cannot read '", path, "' at offset ",
            offset, " (", length, " bytes): ", errno ? std::strerror(errno) : "file truncated");
  thread_bytes_read() += length;
  if (length >= 1 && bytes[0] == 'E')
    MDL_FAIL(std::string(bytes.begin() + 1, bytes.end()), " (remembered by the file cache '", path, "')");
  return deserialize_sample(bytes.data(), bytes.size(), "'" + path + "' at offset " + std::to_string(offset));
}

void FileCache::store(int64_t index, const Sample& sample) { append(index, serialize_sample(sample)); }

void FileCache::store_failure(int64_t index, const std::string& what) { append(index, "E" + what); }

void FileCache::append(int64_t index, const std::string& record) {
  std::lock_guard<std::mutex> lock(mu_);
  if (complete_ || offsets_[size_t(index)] >= 0) return;
  pwrite_all(fd_, record.data(), record.size(), end_, partial_path_);
  offsets_[size_t(index)] = end_;
  lengths_[size_t(index)] = int64_t(record.size());
  end_ += int64_t(record.size());
  if (++stored_ == size_) finish();
}

void FileCache::finish() {
  std::string tail;
  for (int64_t i = 0; i < size_; ++i) {
    put_u64(tail, uint64_t(offsets_[size_t(i)]));
    put_u64(tail, uint64_t(lengths_[size_t(i)]));
  }
  tail.append(kMagic, 8);
  put_u64(tail, kVersion);
  put_u64(tail, uint64_t(size_));
  put_u64(tail, uint64_t(end_));
  put_u64(tail, key_hash_);
  pwrite_all(fd_, tail.data(), tail.size(), end_, partial_path_);
  MDL_CHECK(::rename(partial_path_.c_str(), final_path_.c_str()) == 0, "FileCache: cannot rename '", partial_path_,
            "' to '", final_path_, "': ", std::strerror(errno));
  complete_ = true;
}

}  // namespace mdl::data
