// TextDataset: character-level language modelling over a UTF-8 text file. The vocabulary is the
// file's distinct code points, sorted; sample i is (tokens[i, i+T), tokens[i+1, i+T+1)) as I64.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

class TextDataset : public Dataset {
 public:
  // Throws naming the file and byte offset on invalid UTF-8, and when the text is not longer
  // than the context.
  TextDataset(const std::string& path, int64_t context_length);
  int64_t size() const override { return int64_t(tokens_.size()) - context_; }
  Sample get(int64_t index) const override;  // x, y: I64 (T)
  std::string identity() const override { return identity_; }

  int64_t vocab_size() const { return int64_t(vocab_.size()); }
  int64_t context_length() const { return context_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }
  // Text to token ids (throws on a character outside the vocabulary) and back.
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::vector<char32_t> vocab_;
  std::vector<int64_t> tokens_;
  int64_t context_;
  std::string identity_;
};

// UTF-8 to code points; throws naming `name` and the byte offset of the first bad sequence.
std::vector<char32_t> utf8_decode(const std::string& bytes, const std::string& name);
std::string utf8_encode(char32_t cp);

}  // namespace mdl::data
