// mdl::Error, the one exception type for misuse, and MDL_CHECK, which builds its message.
// Every message names the op and what was wrong: shapes, dtypes, devices, files or options.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mdl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}
}  // namespace detail

}  // namespace mdl

// MDL_CHECK(cond, "matmul: shapes ", a, " and ", b, " cannot be multiplied")
#define MDL_CHECK(cond, ...)                                  \
  do {                                                        \
    if (!(cond)) [[unlikely]]                                 \
      throw ::mdl::Error(::mdl::detail::concat(__VA_ARGS__)); \
  } while (0)

#define MDL_FAIL(...) throw ::mdl::Error(::mdl::detail::concat(__VA_ARGS__))
