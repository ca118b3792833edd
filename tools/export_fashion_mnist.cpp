// export_fashion_mnist: writes Fashion-MNIST as an ImageFolder of PNG files, so the image
// decode path (and bench_data's ImageFolder epoch) runs on real images.
//   export_fashion_mnist OUT_DIR [--test] [--limit N] [--threads N] [--root IDX_DIR]
// OUT_DIR must be absent or empty.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "data/export.h"
#include "data/idx.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  using namespace mdl;
  std::string out, root = data::kFashionMnistRoot;
  bool train = true;
  data::ExportOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "export_fashion_mnist: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--test") train = false;
    else if (a == "--limit") opt.limit = std::atoll(value().c_str());
    else if (a == "--threads") opt.threads = std::atoi(value().c_str());
    else if (a == "--root") root = value();
    else if (!a.empty() && a[0] != '-' && out.empty()) out = a;
    else {
      std::fprintf(stderr, "usage: export_fashion_mnist OUT_DIR [--test] [--limit N] [--threads N] [--root IDX_DIR]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: export_fashion_mnist OUT_DIR [--test] [--limit N] [--threads N] [--root IDX_DIR]\n");
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    data::FashionMNIST ds(root, train);
    const int64_t n = data::export_image_folder(ds, out, data::FashionMNIST::classes(), opt);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %lld PNG files to %s in %.1f s\n", static_cast<long long>(n), out.c_str(), s);
  } catch (const Error& e) {
    std::fprintf(stderr, "export_fashion_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
