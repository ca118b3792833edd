// Transforms: ToTensor, Normalize, the window-based crops and flip, Resize, Compose. None
// modifies its input (it may be a cached sample); each returns a new tensor.
#include "data/transforms.h"

#include <stb/stb_image_resize.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "tensor/error.h"
#include "tensor/half.h"

namespace mdl::data {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// An image's size and how its elements are laid out: `planes` planes of rows, each row W pixels
// of `pixel` contiguous elements. u8 HWC: 1 plane, pixel = C; floating CHW: C planes, pixel = 1.
struct Geom {
  int64_t h, w, c, planes, pixel;
  bool hwc, two_d;
};

Geom image_geom(const Tensor& x, const char* who) {
  MDL_CHECK(x.defined() && x.device().is_cpu(), who, ": expected an image tensor on the CPU");
  if (x.dtype() == kU8 && (x.dim() == 2 || x.dim() == 3)) {
    const int64_t c = x.dim() == 3 ? x.size(2) : 1;
    return {x.size(0), x.size(1), c, 1, c, true, x.dim() == 2};
  }
  MDL_CHECK(x.is_floating_point() && x.dim() == 3, who, ": expected a u8 (H, W[, C]) or floating (C, H, W) image, got ",
            dtype_name(x.dtype()), " ", shape_str(x.shape()));
  return {x.size(1), x.size(2), x.size(0), x.size(0), 1, false, false};
}

Tensor make_image(const Geom& g, int64_t h, int64_t w, DType dtype) {
  if (g.two_d) return make_tensor({h, w}, dtype, Device::cpu());
  return g.hwc ? make_tensor({h, w, g.c}, dtype, Device::cpu()) : make_tensor({g.c, h, w}, dtype, Device::cpu());
}

// out(i, j) = in(top + i, left + j), or in(top + i, left + ow - 1 - j) when flipped; zero where
// that falls outside the image.
Tensor window(const Tensor& x, const char* who, int64_t top, int64_t left, int64_t oh, int64_t ow, bool flip) {
  const Geom g = image_geom(x, who);
  const Tensor in = x.contiguous();
  Tensor out = make_image(g, oh, ow, x.dtype());
  const size_t px = size_t(g.pixel) * x.element_size();  // bytes per pixel in a row
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t i = 0; i < oh; ++i) {
      uint8_t* drow = dst + size_t((p * oh + i) * ow) * px;
      const int64_t y = top + i;
      if (y < 0 || y >= g.h) {
        std::memset(drow, 0, size_t(ow) * px);
        continue;
      }
      const uint8_t* srow = src + size_t((p * g.h + y) * g.w) * px;
      if (!flip) {
        const int64_t j0 = std::clamp<int64_t>(-left, 0, ow), j1 = std::clamp<int64_t>(g.w - left, j0, ow);
        std::memset(drow, 0, size_t(j0) * px);
        std::memcpy(drow + size_t(j0) * px, srow + size_t(left + j0) * px, size_t(j1 - j0) * px);
        std::memset(drow + size_t(j1) * px, 0, size_t(ow - j1) * px);
        continue;
      }
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t sx = left + ow - 1 - j;
        if (sx < 0 || sx >= g.w) std::memset(drow + size_t(j) * px, 0, px);
        else if (px == 1) drow[j] = srow[sx];  // grayscale u8: skip memcpy's call per pixel
        else std::memcpy(drow + size_t(j) * px, srow + size_t(sx) * px, px);
      }
    }
  return out;
}

template <class T>
std::string join(const std::vector<T>& v) {
  std::ostringstream s;
  s << std::setprecision(17);  // the file cache's key: two values that differ name two caches
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

// torchvision's place for the window: round((size - crop) / 2) with Python's round (halves to even)
// when the image is larger; when it is smaller, the image is padded by (crop - size) // 2 before,
// so the window starts that far before the image.
int64_t center_crop_start(int64_t size, int64_t crop) {
  if (crop > size) return -((crop - size) / 2);
  return int64_t(std::nearbyint(double(size - crop) / 2.0));
}

}  // namespace

Generator sample_generator(uint64_t seed, int64_t epoch, int64_t index) {
  return Generator(splitmix(splitmix(splitmix(seed) ^ uint64_t(epoch)) ^ uint64_t(index)));
}

ToTensor::ToTensor(DType dtype) : dtype_(dtype) {
  MDL_CHECK(dtype == kF32 || dtype == kF16 || dtype == kBF16, "ToTensor: output dtype must be f32, f16 or bf16, got ",
            dtype_name(dtype));
}

Tensor ToTensor::operator()(const Tensor& x, Generator&) const {
  MDL_CHECK(x.defined() && x.dtype() == kU8 && (x.dim() == 2 || x.dim() == 3),
            "ToTensor: expected a u8 (H, W[, C]) image, got ", x.defined() ? dtype_name(x.dtype()) : "undefined", " ",
            x.defined() ? shape_str(x.shape()) : "");
  const Geom g = image_geom(x, "ToTensor");
  static const std::array<float, 256> scaled = [] {  // v / 255, exactly as a division gives it
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[size_t(v)] = float(v) / 255.0f;
    return t;
  }();
  const Tensor in = x.contiguous();
  const auto* src = in.data_ptr<uint8_t>();  // (H, W, C)
  const int64_t hw = g.h * g.w;
  Tensor out = make_tensor({g.c, g.h, g.w}, dtype_, Device::cpu());  // (C, H, W)
  std::vector<float> staging(dtype_ == kF32 ? 0 : size_t(g.c * hw));
  float* planes = dtype_ == kF32 ? out.data_ptr<float>() : staging.data();
  for (int64_t i = 0; i < hw; ++i)
    for (int64_t c = 0; c < g.c; ++c) planes[c * hw + i] = scaled[src[i * g.c + c]];
  if (dtype_ == kF16) f32_to_f16(planes, out.data_ptr<Half>(), int64_t(staging.size()));
  else if (dtype_ == kBF16) f32_to_bf16(planes, out.data_ptr<BFloat16>(), int64_t(staging.size()));
  return out;
}

std::string ToTensor::name() const { return std::string("ToTensor(") + dtype_name(dtype_) + ")"; }

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  MDL_CHECK(!mean_.empty() && mean_.size() == std_.size(),
            "Normalize: mean and std need the same, nonzero length, got ", mean_.size(), " and ", std_.size());
  for (double s : std_)
    MDL_CHECK(std::isfinite(s) && s != 0.0, "Normalize: std must be finite and nonzero, got (", join(std_), ")");
  for (double m : mean_) MDL_CHECK(std::isfinite(m), "Normalize: mean must be finite, got (", join(mean_), ")");
}

Tensor Normalize::operator()(const Tensor& x, Generator&) const {
  MDL_CHECK(x.defined() && x.is_floating_point() && x.dim() == 3,
            "Normalize: expected a floating (C, H, W) image, got ", x.defined() ? dtype_name(x.dtype()) : "undefined",
            " ", x.defined() ? shape_str(x.shape()) : "", " (apply ToTensor first)");
  const int64_t c = x.size(0), hw = x.size(1) * x.size(2);
  MDL_CHECK(mean_.size() == 1 || int64_t(mean_.size()) == c, "Normalize: ", mean_.size(), " means for an image with ",
            c, " channels");
  const Tensor in = x.contiguous();
  Tensor out = make_tensor(x.shape(), x.dtype(), Device::cpu());
  dispatch_floating(x.dtype(), "Normalize", [&]<class T>() {
    using A = acc_t<T>;
    const T* s = in.data_ptr<T>();
    T* d = out.data_ptr<T>();
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t k = mean_.size() == 1 ? 0 : size_t(ch);
      const A m = A(mean_[k]), inv = A(1.0 / std_[k]);
      for (int64_t i = ch * hw; i < (ch + 1) * hw; ++i) d[i] = T((A(s[i]) - m) * inv);
    }
  });
  return out;
}

std::string Normalize::name() const { return "Normalize(" + join(mean_) + ";" + join(std_) + ")"; }

RandomCrop::RandomCrop(int64_t size, int64_t padding) : size_(size), padding_(padding) {
  MDL_CHECK(size >= 1 && padding >= 0, "RandomCrop: size must be >= 1 and padding >= 0, got ", size, " and ", padding);
}

Tensor RandomCrop::operator()(const Tensor& x, Generator& gen) const {
  const Geom g = image_geom(x, "RandomCrop");
  MDL_CHECK(g.h + 2 * padding_ >= size_ && g.w + 2 * padding_ >= size_, "RandomCrop: a ", size_, "x", size_,
            " window does not fit an image of ", g.h, "x", g.w, " padded by ", padding_);
  const int64_t top = int64_t(gen.next_u64() % uint64_t(g.h + 2 * padding_ - size_ + 1)) - padding_;
  const int64_t left = int64_t(gen.next_u64() % uint64_t(g.w + 2 * padding_ - size_ + 1)) - padding_;
  return window(x, "RandomCrop", top, left, size_, size_, false);
}

std::string RandomCrop::name() const {
  return "RandomCrop(" + std::to_string(size_) + "," + std::to_string(padding_) + ")";
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  MDL_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x, Generator& gen) const {
  const Geom g = image_geom(x, "RandomHorizontalFlip");
  const bool flip = gen.next_double() < p_;
  return window(x, "RandomHorizontalFlip", 0, 0, g.h, g.w, flip);
}

std::string RandomHorizontalFlip::name() const { return "RandomHorizontalFlip(" + join(std::vector<double>{p_}) + ")"; }

Resize::Resize(int64_t height, int64_t width) : h_(height), w_(width) {
  MDL_CHECK(height >= 1 && width >= 1, "Resize: size must be positive, got ", height, "x", width);
}

Tensor Resize::operator()(const Tensor& x, Generator&) const {
  const Geom g = image_geom(x, "Resize");
  MDL_CHECK(x.dtype() == kU8 || x.dtype() == kF32, "Resize: supports u8 (H, W, C) and f32 (C, H, W), got ",
            dtype_name(x.dtype()));
  MDL_CHECK(g.h >= 1 && g.w >= 1, "Resize: empty image ", shape_str(x.shape()));
  const Tensor in = x.contiguous();
  Tensor out = make_image(g, h_, w_, x.dtype());
  int ok = 1;
  if (x.dtype() == kU8) {
    ok = stbir_resize_uint8(in.data_ptr<uint8_t>(), int(g.w), int(g.h), 0, out.data_ptr<uint8_t>(), int(w_), int(h_), 0,
                            int(g.c));
  } else {
    for (int64_t c = 0; c < g.c && ok; ++c)  // one plane at a time
      ok = stbir_resize_float(in.data_ptr<float>() + c * g.h * g.w, int(g.w), int(g.h), 0,
                              out.data_ptr<float>() + c * h_ * w_, int(w_), int(h_), 0, 1);
  }
  MDL_CHECK(ok, "Resize: stb_image_resize failed resizing ", shape_str(x.shape()), " to ", h_, "x", w_);
  return out;
}

std::string Resize::name() const { return "Resize(" + std::to_string(h_) + "," + std::to_string(w_) + ")"; }

CenterCrop::CenterCrop(int64_t height, int64_t width) : h_(height), w_(width) {
  MDL_CHECK(height >= 1 && width >= 1, "CenterCrop: size must be positive, got ", height, "x", width);
}

Tensor CenterCrop::operator()(const Tensor& x, Generator&) const {
  const Geom g = image_geom(x, "CenterCrop");
  return window(x, "CenterCrop", center_crop_start(g.h, h_), center_crop_start(g.w, w_), h_, w_, false);
}

std::string CenterCrop::name() const { return "CenterCrop(" + std::to_string(h_) + "," + std::to_string(w_) + ")"; }

Compose::Compose(std::vector<TransformPtr> transforms) : transforms_(std::move(transforms)) {
  for (const TransformPtr& t : transforms_) MDL_CHECK(t != nullptr, "Compose: null transform in the list");
}

Tensor Compose::operator()(const Tensor& x, Generator& gen) const {
  Tensor y = x;
  for (const TransformPtr& t : transforms_) y = (*t)(y, gen);
  return y;
}

bool Compose::is_random() const {
  for (const TransformPtr& t : transforms_)
    if (t->is_random()) return true;
  return false;
}

std::string Compose::name() const {
  std::string s = "Compose(";
  for (size_t i = 0; i < transforms_.size(); ++i) {
    if (i) s += ',';  // appended apart: g++ 12 warns falsely (-Wrestrict) on "," + string
    s += transforms_[i]->name();
  }
  return s + ")";
}

}  // namespace mdl::data
