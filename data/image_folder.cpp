// ImageFolder: the directory scan (sorted, checked) and per-sample decoding.
#include "data/image_folder.h"

#include <algorithm>
#include <filesystem>

#include "data/file_util.h"
#include "tensor/error.h"

namespace mdl::data {

namespace fs = std::filesystem;

bool ImageFolder::is_image_file(const std::string& name) { return format_from_extension(name) != ImageFormat::Unknown; }

ImageFolder::ImageFolder(const std::string& root, Channels channels, ImageLimits limits)
    : root_(root), channels_(channels), limits_(limits) {
  MDL_CHECK(limits.max_side >= 1 && limits.max_side <= 65536, "ImageFolder: ImageLimits.max_side = ", limits.max_side,
            " (expected 1 to 65536)");
  std::error_code ec;
  MDL_CHECK(fs::is_directory(root, ec), "ImageFolder: '", root, "' is not a directory");
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory()) classes_.push_back(e.path().filename().string());
  MDL_CHECK(!ec, "ImageFolder: cannot list '", root, "': ", ec.message());
  std::sort(classes_.begin(), classes_.end());
  MDL_CHECK(!classes_.empty(), "ImageFolder: '", root, "' has no class folders (expected root/<class>/<image>)");

  std::string stamps = "ImageFolder(" + root + ",channels=" + std::to_string(int(channels)) +
                       ",max_side=" + std::to_string(limits.max_side) + ")";
  for (size_t c = 0; c < classes_.size(); ++c) {
    const fs::path dir = fs::path(root) / classes_[c];
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (!e.is_directory() && is_image_file(e.path().filename().string()))
        names.push_back(e.path().filename().string());
    MDL_CHECK(!ec, "ImageFolder: cannot list '", dir.string(), "': ", ec.message());
    MDL_CHECK(!names.empty(), "ImageFolder: class folder '", dir.string(),
              "' has no images (png, jpg, jpeg, bmp, gif, pnm, ppm, pgm)");
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      files_.push_back((dir / n).string());
      labels_.push_back(int64_t(c));
      stamps += '|';  // appended apart: g++ 12 warns falsely (-Wrestrict) on "|" + string here
      stamps += file_stamp(files_.back(), "ImageFolder");
    }
  }
  identity_ = "ImageFolder:" + hex64(fnv1a(stamps)) + ":" + std::to_string(files_.size());
}

Sample ImageFolder::get(int64_t index) const {
  check_index("ImageFolder::get", index, size());
  return {read_image(files_[size_t(index)], channels_, limits_), label_tensor(labels_[size_t(index)])};
}

const std::string& ImageFolder::path(int64_t index) const {
  check_index("ImageFolder::path", index, size());
  return files_[size_t(index)];
}

int64_t ImageFolder::label(int64_t index) const {
  check_index("ImageFolder::label", index, size());
  return labels_[size_t(index)];
}

}  // namespace mdl::data
