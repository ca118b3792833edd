// ImageFolder export: class folder names, zero-padded file names, PNG encoding on a few threads.
#include "data/export.h"

#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "data/image.h"
#include "tensor/error.h"

namespace mdl::data {

namespace fs = std::filesystem;

namespace {
std::string padded(int64_t v, size_t width) {
  std::string s = std::to_string(v);
  return std::string(width > s.size() ? width - s.size() : 0, '0') + s;
}
}  // namespace

int64_t export_image_folder(const Dataset& dataset, const std::string& root,
                            const std::vector<std::string>& class_names, ExportOptions options) {
  MDL_CHECK(!class_names.empty(), "export_image_folder: no class names given");
  MDL_CHECK(options.threads >= 1, "export_image_folder: threads must be >= 1, got ", options.threads);
  std::error_code ec;
  const bool occupied = fs::exists(root, ec) && !fs::is_empty(root, ec);
  MDL_CHECK(!ec, "export_image_folder: cannot inspect '", root, "': ", ec.message());
  MDL_CHECK(!occupied, "export_image_folder: '", root,
            "' is not empty; export into a new or empty folder (files already there would join the dataset)");
  const int64_t n = options.limit < 0 ? dataset.size() : std::min(options.limit, dataset.size());
  const size_t label_width = std::to_string(class_names.size() - 1).size();
  const size_t index_width = std::to_string(std::max<int64_t>(n - 1, 0)).size();
  std::vector<fs::path> dirs;
  for (size_t c = 0; c < class_names.size(); ++c) {
    std::string name = class_names[c];
    for (char& ch : name)
      if (ch == '/' || ch == ' ') ch = '_';
    dirs.push_back(fs::path(root) / (padded(int64_t(c), label_width) + "_" + name));
    fs::create_directories(dirs.back(), ec);
    MDL_CHECK(!ec, "export_image_folder: cannot create '", dirs.back().string(), "': ", ec.message());
  }

  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) {
      try {
        Sample s = dataset.get(i);
        const int64_t label = s.y.item<int64_t>();
        MDL_CHECK(label >= 0 && label < int64_t(dirs.size()), "export_image_folder: sample ", i, " has label ", label,
                  " but only ", dirs.size(), " class names were given");
        write_png((dirs[size_t(label)] / (padded(i, index_width) + ".png")).string(), s.x);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < options.threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return n;
}

}  // namespace mdl::data
