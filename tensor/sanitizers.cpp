// The library's own answer to which sanitizers instrument it (g++ defines __SANITIZE_*__, clang
// answers __has_feature).
#include "tensor/sanitizers.h"

#if defined(__has_feature)
#define MDL_HAS_FEATURE(x) __has_feature(x)
#else
#define MDL_HAS_FEATURE(x) 0
#endif

namespace mdl {

bool built_with_address_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || MDL_HAS_FEATURE(address_sanitizer)
  return true;
#else
  return false;
#endif
}

bool built_with_thread_sanitizer() {
#if defined(__SANITIZE_THREAD__) || MDL_HAS_FEATURE(thread_sanitizer)
  return true;
#else
  return false;
#endif
}

}  // namespace mdl
