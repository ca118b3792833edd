// ImageFolder: root/<class>/<image> decoded by stb_image, classes sorted by name, labels their
// positions in that order. Files with other extensions are ignored; an empty class folder throws.
// Only the files directly in each class folder are read: images in folders below it
// (root/<class>/<sub>/<image>) are ignored, where torchvision's ImageFolder walks each class folder
// recursively; flatten such a tree, or link its images into the class folder, to read them.
// Each file's bytes must be the format its extension names, within ImageLimits (data/image.h).
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"

namespace mdl::data {

class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(const std::string& root, Channels channels = Channels::Rgb, ImageLimits limits = {});
  int64_t size() const override { return int64_t(files_.size()); }
  Sample get(int64_t index) const override;  // x: u8 (H, W, C), y: the class index
  std::string identity() const override { return identity_; }

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(int64_t index) const;
  int64_t label(int64_t index) const override;

  // The extensions read (any case): png, jpg, jpeg, bmp, gif, pnm, ppm, pgm.
  static bool is_image_file(const std::string& name);

 private:
  std::string root_;
  Channels channels_;
  ImageLimits limits_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  std::string identity_;
};

}  // namespace mdl::data
