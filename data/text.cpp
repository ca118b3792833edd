// TextDataset: strict UTF-8 decoding, the sorted vocabulary, and context windows.
#include "data/text.h"

#include <algorithm>
#include <cstring>

#include "data/file_util.h"
#include "tensor/error.h"

namespace mdl::data {

std::vector<char32_t> utf8_decode(const std::string& s, const std::string& name) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = uint8_t(s[i]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xe ? 3 : (b0 >> 3) == 0x1e ? 4 : 0;
    MDL_CHECK(len > 0 && i + size_t(len) <= s.size(), "TextDataset: '", name, "' is not valid UTF-8 at byte offset ",
              i);
    char32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1f) : len == 3 ? (b0 & 0x0f) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = uint8_t(s[i + size_t(k)]);
      MDL_CHECK((b & 0xc0) == 0x80, "TextDataset: '", name, "' is not valid UTF-8 at byte offset ", i);
      cp = cp << 6 | (b & 0x3f);
    }
    static const char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    MDL_CHECK(cp >= kMin[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff), "TextDataset: '", name,
              "' is not valid UTF-8 at byte offset ", i, " (overlong or out-of-range code point)");
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

std::string utf8_encode(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += char(0xe0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  } else {
    s += char(0xf0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3f));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  }
  return s;
}

TextDataset::TextDataset(const std::string& path, int64_t context_length) : context_(context_length) {
  MDL_CHECK(context_length >= 1, "TextDataset: context_length must be at least 1, got ", context_length);
  std::vector<uint8_t> bytes = read_file(path, "TextDataset");
  std::vector<char32_t> text = utf8_decode(std::string(bytes.begin(), bytes.end()), path);
  MDL_CHECK(int64_t(text.size()) > context_length, "TextDataset: '", path, "' has ", text.size(),
            " characters, not more than the context length ", context_length);
  vocab_ = text;
  std::sort(vocab_.begin(), vocab_.end());
  vocab_.erase(std::unique(vocab_.begin(), vocab_.end()), vocab_.end());
  tokens_.reserve(text.size());
  for (char32_t c : text) tokens_.push_back(std::lower_bound(vocab_.begin(), vocab_.end(), c) - vocab_.begin());
  identity_ = "TextDataset(" + file_stamp(path, "TextDataset") + ",T=" + std::to_string(context_length) + ")";
}

Sample TextDataset::get(int64_t index) const {
  check_index("TextDataset::get", index, size());
  Tensor x = make_tensor({context_}, kI64, Device::cpu());
  Tensor y = make_tensor({context_}, kI64, Device::cpu());
  std::memcpy(x.raw_data(), tokens_.data() + index, size_t(context_) * sizeof(int64_t));
  std::memcpy(y.raw_data(), tokens_.data() + index + 1, size_t(context_) * sizeof(int64_t));
  return {x, y};
}

std::vector<int64_t> TextDataset::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (char32_t c : utf8_decode(text, "encode")) {
    auto it = std::lower_bound(vocab_.begin(), vocab_.end(), c);
    MDL_CHECK(it != vocab_.end() && *it == c, "TextDataset::encode: character U+", std::hex, uint32_t(c),
              " is not in the vocabulary");
    ids.push_back(it - vocab_.begin());
  }
  return ids;
}

std::string TextDataset::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) {
    MDL_CHECK(id >= 0 && id < vocab_size(), "TextDataset::decode: token ", id, " outside the vocabulary of ",
              vocab_size());
    s += utf8_encode(vocab_[size_t(id)]);
  }
  return s;
}

}  // namespace mdl::data
