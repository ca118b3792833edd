// Per-thread, 64-byte aligned packing scratch for the GEMM drivers (cpu/gemm.cpp, cpu/gemm_amx.cpp):
// three slots (packed A, packed B, and an operand widened from bf16 for an f32 layout: gemm.cpp's
// PackedA and PackedB) per element type and thread, which only grow.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "tensor/error.h"

namespace mdl::cpu {

template <class T>
T* packing_scratch(int slot, int64_t n) {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<T, Free> buf[3];
  thread_local int64_t cap[3] = {0, 0, 0};
  if (n > cap[slot]) {
    const size_t bytes = (size_t(n) * sizeof(T) + 63) / 64 * 64;
    buf[slot].reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    MDL_CHECK(buf[slot], "gemm: cannot allocate ", bytes, " bytes of packing scratch");
    cap[slot] = n;
  }
  return buf[slot].get();
}

}  // namespace mdl::cpu
