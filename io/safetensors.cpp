// Reading and writing safetensors files. The writer builds the JSON header from shapes alone,
// pads it, then streams each tensor's bytes into a temporary file that is fsynced and renamed
// over the target. The reader trusts nothing: lengths, names, dtypes, shapes and offsets are all
// checked before any tensor is allocated, so its allocations never exceed the file's size.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <numeric>
#include <unordered_set>

#include "io/json.h"
#include "tensor/error.h"

namespace mdl::io {

static_assert(std::endian::native == std::endian::little, "safetensors: the byte layout assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{kF32, "F32"}, {kF16, "F16"}, {kBF16, "BF16"}, {kF64, "F64"},
                                     {kI32, "I32"}, {kI64, "I64"}, {kU8, "U8"},     {kBool, "BOOL"}};
// Names the format defines for which mdl has no dtype.
constexpr const char* kForeignDTypes[] = {"I8",      "I16",     "U16",     "U32",     "U64", "F8_E4M3",
                                          "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};

const char* safetensors_name(DType t) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == t) return d.name;
  MDL_FAIL("save_safetensors: unsupported dtype ", t);
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

std::string offsets_str(uint64_t begin, uint64_t end) { return detail::concat("[", begin, ", ", end, "]"); }

// ---------------------------------------------------------------- writing

// A temporary file beside the target: commit() renames it over the target; otherwise the
// destructor removes it, so a failed save leaves the old file and no debris.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create the temporary file '" + tmp_ + "'");
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("cannot write the temporary file '" + tmp_ + "'");
      p += w;
      n -= size_t(w);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail("cannot fsync the temporary file '" + tmp_ + "'");
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close the temporary file '" + tmp_ + "'");
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file '" + tmp_ + "' over it");
    committed_ = true;
    sync_directory();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int e = errno;
    MDL_FAIL("save_safetensors: ", path_, ": ", what, ": ", errno_text(e == 0 ? EIO : e));
  }
  // Makes the rename itself durable; best effort, as some file systems refuse.
  void sync_directory() const {
    std::string dir = std::filesystem::path(path_).parent_path().string();
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)::fsync(fd);
    ::close(fd);
  }

  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// The order the tensors' data is laid out in: widest elements first, else as given (the reference
// writer's rule), so that every tensor starts at a multiple of its element size and a reader may
// view the mapped bytes as its dtype in place. The header lists them as given.
std::vector<size_t> data_order(const NamedTensors& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  auto width = [&](size_t i) { return tensors[i].second.defined() ? tensors[i].second.element_size() : 0; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return width(a) > width(b); });
  return order;
}

// The header for `tensors`, their data laid out in `order` (data_order's), padded with spaces so
// that 8 + its size % 8 == 0.
std::string make_header(const std::string& path, const NamedTensors& tensors, const Metadata& metadata,
                        const std::vector<size_t>& order) {
  const char* op = "save_safetensors";
  json::Value header = json::Value::make_object();
  if (!metadata.empty()) {
    json::Value& meta = header.add(std::string(kMetadataKey), json::Value::make_object());
    std::unordered_set<std::string_view> keys;
    for (const auto& [key, value] : metadata) {
      MDL_CHECK(keys.insert(key).second, op, ": ", path, ": duplicate metadata key '", key, "'");
      MDL_CHECK(json::valid_utf8(key), op, ": ", path, ": metadata key '", key, "' is not valid UTF-8");
      MDL_CHECK(json::valid_utf8(value), op, ": ", path, ": the value of metadata key '", key, "' is not valid UTF-8");
      meta.add(key, json::Value::make_string(value));
    }
  }
  std::unordered_set<std::string_view> names;
  std::vector<uint64_t> begin(tensors.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    begin[i] = offset;
    offset += tensors[i].second.defined() ? tensors[i].second.nbytes() : 0;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    MDL_CHECK(!name.empty(), op, ": ", path, ": tensor names must be non-empty");
    MDL_CHECK(name != kMetadataKey, op, ": ", path, ": the tensor name '", kMetadataKey, "' is reserved for metadata");
    MDL_CHECK(names.insert(name).second, op, ": ", path, ": duplicate tensor name '", name, "'");
    MDL_CHECK(json::valid_utf8(name), op, ": ", path, ": tensor name '", name, "' is not valid UTF-8");
    MDL_CHECK(t.defined(), op, ": ", path, ": tensor '", name, "' is undefined");
    json::Value entry = json::Value::make_object();
    entry.add("dtype", json::Value::make_string(safetensors_name(t.dtype())));
    json::Value& shape = entry.add("shape", json::Value::make_array());
    for (int64_t d : t.shape()) shape.push(json::Value::make_int(d));
    json::Value& offsets = entry.add("data_offsets", json::Value::make_array());
    offsets.push(json::Value::make_uint(begin[i]));
    offsets.push(json::Value::make_uint(begin[i] + t.nbytes()));
    header.add(name, std::move(entry));
  }
  std::string text = json::dump(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  MDL_CHECK(text.size() <= kMaxHeaderBytes, op, ": ", path, ": the header would be ", text.size(),
            " bytes, over the format's limit of ", kMaxHeaderBytes);
  return text;
}

// ---------------------------------------------------------------- reading

struct Context {
  const char* op;
  const std::string& path;
};

template <class... Args>
[[noreturn]] void bad(const Context& c, const Args&... what) {
  MDL_FAIL(c.op, ": ", c.path, ": ", what...);
}

// A read-only regular file with checked positioned reads.
class InputFile {
 public:
  explicit InputFile(const Context& c) : c_(c) {
    fd_ = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      int e = errno;
      bad(c, "cannot open: ", errno_text(e));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      int e = errno;
      ::close(fd_);
      bad(c, "cannot stat: ", errno_text(e));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      bad(c, "not a regular file");
    }
    size_ = uint64_t(st.st_size);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() { ::close(fd_); }

  uint64_t size() const { return size_; }

  void read_at(void* dst, uint64_t n, uint64_t offset) const {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t r = ::pread(fd_, p, std::min<uint64_t>(n, uint64_t(1) << 30), off_t(offset));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        int e = errno;
        bad(c_, "read error at byte ", offset, ": ", errno_text(e));
      }
      if (r == 0) bad(c_, "unexpected end of file at byte ", offset, " (did the file change while being read?)");
      p += r;
      n -= uint64_t(r);
      offset += uint64_t(r);
    }
  }

 private:
  const Context& c_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  DType dtype = kF32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

DType parse_dtype(const Context& c, const std::string& name, const json::Value& v) {
  if (!v.is_string()) bad(c, "tensor '", name, "': dtype must be a string, got ", v.kind_name());
  for (const auto& d : kDTypeNames)
    if (v.str == d.name) return d.dtype;
  for (const char* f : kForeignDTypes)
    if (v.str == f)
      bad(c, "tensor '", name, "' has dtype ", f,
          ", which mdl does not support (supported: F32, F16, BF16, F64, I32, I64, U8, BOOL)");
  bad(c, "tensor '", name, "' has unknown dtype '", v.str, "'");
}

Shape parse_shape(const Context& c, const std::string& name, const json::Value& v) {
  if (!v.is_array()) bad(c, "tensor '", name, "': shape must be an array of integers, got ", v.kind_name());
  Shape shape;
  int64_t elements = 1;  // product of the nonzero dims, so that strides cannot overflow either
  for (const json::Value& d : v.items) {
    if (!d.is_int()) bad(c, "tensor '", name, "': shape must be an array of integers, found a ", d.kind_name());
    if (d.negative) bad(c, "tensor '", name, "' has a negative dimension -", d.magnitude, " in its shape");
    if (d.magnitude > uint64_t(INT64_MAX)) bad(c, "tensor '", name, "' has a dimension ", d.magnitude, " too large");
    int64_t n = int64_t(d.magnitude);
    shape.push_back(n);
    if (n > 0 && __builtin_mul_overflow(elements, n, &elements))
      bad(c, "tensor '", name, "' has a shape with too many elements (", v.items.size(), " dims, product over 2^63)");
  }
  return shape;
}

Entry parse_entry(const Context& c, const std::string& name, const json::Value& v, uint64_t buffer_size) {
  if (!v.is_object())
    bad(c, "tensor '", name, "' must be an object with dtype, shape and data_offsets, got ", v.kind_name());
  for (const std::string& key : v.keys)
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      bad(c, "tensor '", name, "' has an unexpected key '", key, "' (expected dtype, shape, data_offsets)");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.find(key)) bad(c, "tensor '", name, "' has no ", key);

  Entry e;
  e.name = name;
  e.dtype = parse_dtype(c, name, *v.find("dtype"));
  e.shape = parse_shape(c, name, *v.find("shape"));
  const json::Value& offsets = *v.find("data_offsets");
  if (!offsets.is_array() || offsets.items.size() != 2 || !offsets.items[0].is_uint() || !offsets.items[1].is_uint())
    bad(c, "tensor '", name, "': data_offsets must be [begin, end], two non-negative integers");
  e.begin = offsets.items[0].magnitude;
  e.end = offsets.items[1].magnitude;
  std::string where = offsets_str(e.begin, e.end);
  if (e.begin > e.end) bad(c, "tensor '", name, "' has data_offsets ", where, " with begin after end");

  uint64_t bytes = 0;
  bool overflow = __builtin_mul_overflow(uint64_t(shape_numel(e.shape)), uint64_t(dtype_size(e.dtype)), &bytes);
  if (overflow || bytes != e.end - e.begin)
    bad(c, "tensor '", name, "' has data_offsets ", where, " but dtype ", safetensors_name(e.dtype), " and shape ",
        shape_str(e.shape), " need ", overflow ? std::string("more than 2^64") : std::to_string(bytes), " bytes");
  if (e.end > buffer_size)
    bad(c, "tensor '", name, "' has data_offsets ", where, " past the end of the data buffer (", buffer_size,
        " bytes; is the file truncated?)");
  return e;
}

Metadata parse_metadata(const Context& c, const json::Value& v) {
  if (!v.is_object()) bad(c, kMetadataKey, " must be an object of strings, got ", v.kind_name());
  Metadata out;
  for (size_t i = 0; i < v.items.size(); ++i) {
    if (!v.items[i].is_string())
      bad(c, kMetadataKey, " value for key '", v.keys[i], "' must be a string, got ", v.items[i].kind_name());
    out.emplace_back(v.keys[i], v.items[i].str);
  }
  return out;
}

// The spec requires the buffer to be fully indexed: sorted by offset, each tensor starts where
// the previous one ended, and the last ends at the end of the file.
void check_coverage(const Context& c, const std::vector<Entry>& sorted, uint64_t buffer_size) {
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : sorted) {
    if (e.begin < at)
      bad(c, "tensors '", prev->name, "' (data_offsets ", offsets_str(prev->begin, prev->end), ") and '", e.name,
          "' (data_offsets ", offsets_str(e.begin, e.end), ") overlap");
    if (e.begin > at)
      bad(c, "the data buffer has a hole: bytes ", offsets_str(at, e.begin), " ",
          prev ? "between '" + prev->name + "' and '" + e.name + "'" : "before '" + e.name + "'",
          " belong to no tensor");
    at = e.end;
    prev = &e;
  }
  if (at != buffer_size)
    bad(c, "the data buffer has ", buffer_size - at, " trailing bytes ", offsets_str(at, buffer_size),
        " that belong to no tensor");
}

SafetensorsContents read_file(const std::string& path, const char* op) {
  const Context c{op, path};
  InputFile file(c);
  if (file.size() < 8) bad(c, "the file is ", file.size(), " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  file.read_at(&n, 8, 0);
  if (n > kMaxHeaderBytes) bad(c, "header length ", n, " exceeds the format's limit of ", kMaxHeaderBytes, " bytes");
  if (n > file.size() - 8)
    bad(c, "header length ", n, " runs past the end of the file (", file.size(), " bytes; is it truncated?)");

  std::string text(n, '\0');
  file.read_at(text.data(), n, 8);
  std::string context = std::string(op) + ": " + path + ": header";
  json::Value header = json::parse(text, context);
  if (!header.is_object()) bad(c, "the header must be a JSON object, got a JSON ", header.kind_name());
  if (text[0] != '{') bad(c, "the header must start with '{'");

  const uint64_t buffer_size = file.size() - 8 - n;
  SafetensorsContents out;
  std::vector<Entry> entries;
  for (size_t i = 0; i < header.items.size(); ++i) {
    if (header.keys[i] == kMetadataKey) {
      out.metadata = parse_metadata(c, header.items[i]);
      continue;
    }
    if (header.keys[i].empty()) bad(c, "a tensor has an empty name");
    entries.push_back(parse_entry(c, header.keys[i], header.items[i], buffer_size));
  }
  // Checked in file order; returned in the header's (for mdl's files, the order they were saved in).
  std::vector<Entry> by_offset = entries;
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_coverage(c, by_offset, buffer_size);

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = make_tensor(e.shape, e.dtype, Device::cpu());
    uint64_t bytes = e.end - e.begin;
    if (bytes > 0) file.read_at(t.raw_data(), bytes, 8 + n + e.begin);
    if (e.dtype == kBool) {
      const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
      for (uint64_t i = 0; i < bytes; ++i)
        if (p[i] > 1)
          bad(c, "tensor '", e.name, "' of dtype BOOL holds byte ", int(p[i]), " at element ", i, " (expected 0 or 1)");
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  const std::vector<size_t> order = data_order(tensors);
  std::string header = make_header(path, tensors, metadata, order);
  uint64_t n = header.size();
  AtomicFile file(path);
  file.write(&n, 8);
  file.write(header.data(), header.size());
  for (size_t i : order) {
    Tensor host = tensors[i].second.detach().to(Device::cpu()).contiguous();
    if (host.nbytes() > 0) file.write(host.raw_data(), host.nbytes());
  }
  file.commit();
}

const std::string* find_metadata(const Metadata& metadata, std::string_view key) {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

SafetensorsContents read_safetensors(const std::string& path) { return read_file(path, "read_safetensors"); }

NamedTensors load_safetensors(const std::string& path) { return read_file(path, "load_safetensors").tensors; }

}  // namespace mdl::io
