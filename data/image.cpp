// stb_image decoding into tensors and stb_image_write PNG encoding.
#include "data/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <cstring>
#include <memory>

#include "data/file_util.h"
#include "tensor/error.h"

namespace mdl::data {

Tensor decode_image(const std::vector<uint8_t>& bytes, const std::string& name, Channels channels) {
  MDL_CHECK(!bytes.empty(), "decode_image: '", name, "' is empty");
  MDL_CHECK(bytes.size() <= size_t(INT32_MAX), "decode_image: '", name, "' is too large (", bytes.size(), " bytes)");
  int w = 0, h = 0, stored = 0;
  const int wanted = int(channels);
  std::unique_ptr<uint8_t, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), int(bytes.size()), &w, &h, &stored, wanted), stbi_image_free);
  MDL_CHECK(pixels, "decode_image: cannot decode '", name, "': ", stbi_failure_reason());
  const int c = wanted ? wanted : stored;
  Tensor t = make_tensor({h, w, c}, kU8, Device::cpu());  // (H, W, C)
  std::memcpy(t.raw_data(), pixels.get(), size_t(h) * size_t(w) * size_t(c));
  return t;
}

Tensor read_image(const std::string& path, Channels channels) {
  return decode_image(read_file(path, "read_image"), path, channels);
}

void write_png(const std::string& path, const Tensor& image) {
  MDL_CHECK(image.dtype() == kU8 && (image.dim() == 2 || image.dim() == 3), "write_png: '", path,
            "': expected a u8 HW or HWC tensor, got ", dtype_name(image.dtype()), " ", shape_str(image.shape()));
  const int h = int(image.size(0)), w = int(image.size(1)), c = image.dim() == 3 ? int(image.size(2)) : 1;
  MDL_CHECK(c >= 1 && c <= 4, "write_png: '", path, "': ", c, " channels (expected 1 to 4)");
  Tensor img = image.contiguous();
  MDL_CHECK(stbi_write_png(path.c_str(), w, h, c, img.raw_data(), w * c) != 0, "write_png: cannot write '", path, "'");
}

}  // namespace mdl::data
