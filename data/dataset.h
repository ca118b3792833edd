// The Dataset contract (random access: size() and get(i)) and the Sample it returns: an input
// tensor x (an image as u8 HWC, or already transformed) and a target y (an I64 scalar label, or a
// tensor such as the next tokens). identity() names the data and its version for the file cache;
// label(i) is sample i's class.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace mdl::data {

struct Sample {
  Tensor x;
  Tensor y;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Thread-safe: the DataLoader calls it from several workers at once.
  virtual Sample get(int64_t index) const = 0;
  // The class label of sample `index`, for choosing samples by class without decoding them. This
  // default calls get() and reads y, which must be one integer; datasets holding their labels in
  // memory override it. Thread-safe, as get().
  virtual int64_t label(int64_t index) const;
  // What the data is and which version of it: paths, sizes, mtimes, options. Equal identities
  // mean equal samples; the file cache is keyed by it.
  virtual std::string identity() const = 0;
};

// A 0-dim I64 tensor holding `label`.
Tensor label_tensor(int64_t label);
// Throws naming `who` unless 0 <= index < size.
void check_index(const char* who, int64_t index, int64_t size);

// Bytes read from files by this thread so far; datasets add to it, the loader reads the deltas.
int64_t& thread_bytes_read();

}  // namespace mdl::data
