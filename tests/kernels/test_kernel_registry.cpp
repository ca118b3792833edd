// The kernel table (kernels/all.h) is the one way a kernel reaches its stub: no source declares a
// stub any other way, every stub has a CPU kernel, and in a CUDA build every one not marked
// CPU_ONLY has a CUDA kernel. Stubs are constant-initialized, so ops work during static
// initialization too. Also: the op-kind names come from their lists.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/api.h"
#include "kernels/all.h"
#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;

namespace {

// Made while the test program starts, before main and before the library's own initializers
// (the test objects are linked ahead of libmdl.a); never destroyed, so exit order cannot matter.
const Tensor* const kMadeAtStaticInit = new Tensor(ones({2}));

// The repository root, from this file's path as the compiler saw it.
std::filesystem::path repo_root() {
  const std::filesystem::path here = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  return here.empty() ? std::filesystem::path(".") : here;
}

}  // namespace

TEST_CASE("kernel registry: no source declares a stub outside the kernel table's macro") {
  const std::filesystem::path root = repo_root();
  REQUIRE(std::filesystem::exists(root / "kernels" / "stub.h"));
  int files = 0;
  for (const char* folder : {"tensor", "io", "profiler", "kernels", "cpu", "cuda", "ops", "autograd", "nn", "optim",
                             "amp", "data", "dist", "switches", "train", "tools", "bench"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      std::ifstream f(entry.path());
      std::stringstream text;
      text << f.rdbuf();
      const bool declares = text.str().find("Stub<") != std::string::npos;
      const bool allowed = entry.path().filename() == "stub.h" && entry.path().parent_path().filename() == "kernels";
      CHECK_MESSAGE((!declares || allowed), entry.path().string(),
                    " names Stub<...>: add the kernel to its contract's X-macro list instead");
    }
  }
  CHECK(files > 100);
}

TEST_CASE("kernel registry: every stub has a CPU kernel") {
  kernels::ensure_kernels_registered();
  const std::vector<kernels::StubInfo> table = kernels::table_stubs();
  CHECK(table.size() >= 40);
  for (const kernels::StubInfo& s : table) CHECK_MESSAGE(s.has_cpu(), std::string(s.name), " has no CPU kernel");
}

TEST_CASE("kernel registry: in a CUDA build every stub not marked CPU-only has a CUDA kernel" *
          doctest::skip(!cuda::compiled())) {
#ifdef MDL_WITH_CUDA
  cuda::detail::fill_kernel_slots();
#endif
  for (const kernels::StubInfo& s : kernels::table_stubs()) {
    if (s.cpu_only) CHECK_MESSAGE(!s.has_cuda(), std::string(s.name), " is marked CPU-only but has a CUDA kernel");
    else CHECK_MESSAGE(s.has_cuda(), std::string(s.name), " has no CUDA kernel");
  }
}

TEST_CASE("kernel registry: a tensor made during static initialization leaves the kernels working") {
  CHECK(test::values(*kMadeAtStaticInit) == std::vector<double>{1, 1});
  CHECK(test::values(*kMadeAtStaticInit + ones({2})) == std::vector<double>{2, 2});
}

TEST_CASE("kernel registry: the op kinds' names follow their enums") {
  CHECK(std::string(unary_op_name(UnaryOp::Neg)) == "neg");
  CHECK(std::string(unary_op_name(UnaryOp::GeluTanh)) == "gelu_tanh");
  CHECK(std::string(unary_op_name(UnaryOp::Expm1)) == "expm1");
  CHECK(std::string(binary_op_name(BinaryOp::Add)) == "add");
  CHECK(std::string(binary_op_name(BinaryOp::Ge)) == "ge");
  CHECK(std::string(reduce_op_name(ReduceOp::Prod)) == "prod");
  CHECK(is_comparison(BinaryOp::Eq));
  CHECK(!is_comparison(BinaryOp::Minimum));
}
