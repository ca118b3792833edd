// Mixed precision end to end: SimpleCNN trained for one epoch on 6,000 Fashion-MNIST images,
// once in f32 and once under autocast f16 + GradScaler from the same initial weights and data
// order, then scored on the 10,000 test images; the two accuracies must agree within 0.5
// percentage points. The IDX files are read here directly (gzip through zlib).
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/autocast.h"
#include "amp/grad_scaler.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

const std::string kDir = "/usr/share/datasets/fashion-mnist/";

// Reads a gzipped IDX file: big-endian magic (0x00000803 images, 0x00000801 labels), the dims,
// then unsigned bytes.
std::vector<uint8_t> read_idx(const std::string& path, uint32_t magic, std::vector<int64_t>& dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(f, "cannot open ", path, " (install dataset-fashion-mnist: make deps)");
  auto read_u32 = [&] {
    unsigned char b[4];
    REQUIRE(gzread(f, b, 4) == 4);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
  };
  REQUIRE(read_u32() == magic);
  dims.assign(magic & 0xff, 0);
  int64_t n = 1;
  for (auto& d : dims) n *= (d = read_u32());
  std::vector<uint8_t> data(static_cast<size_t>(n));
  REQUIRE(gzread(f, data.data(), unsigned(n)) == int(n));
  gzclose(f);
  return data;
}

struct Split {
  Tensor images;  // (N, 1, 28, 28) f32, normalised
  Tensor labels;  // (N) i64
};

Split load(const std::string& prefix, int64_t limit) {
  std::vector<int64_t> idims, ldims;
  auto img = read_idx(kDir + prefix + "-images-idx3-ubyte.gz", 0x00000803, idims);
  auto lab = read_idx(kDir + prefix + "-labels-idx1-ubyte.gz", 0x00000801, ldims);
  const int64_t n = std::min(limit, idims[0]);
  std::vector<float> x(static_cast<size_t>(n * 28 * 28));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (float(img[i]) / 255.0f - 0.2860f) / 0.3530f;
  std::vector<int64_t> y(lab.begin(), lab.begin() + n);
  return {from_vector(x, {n, 1, 28, 28}), from_vector(y, {n})};
}

double accuracy(nn::Module& model, const Split& test, bool autocast) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  const int64_t n = test.images.size(0), bs = 500;
  for (int64_t i = 0; i < n; i += bs) {
    const int64_t b = std::min(bs, n - i);
    Tensor logits;
    {
      amp::AutocastGuard guard(kF16, autocast);
      logits = model.forward(test.images.narrow(0, i, b));
    }
    Tensor hit = eq(argmax(logits, 1), test.labels.narrow(0, i, b));
    correct += sum(hit.to(kI64)).item<int64_t>();
  }
  return 100.0 * double(correct) / double(n);
}

// One epoch of Adam over `train` in fixed order; returns the test accuracy in percent.
double train_and_score(const Split& train, const Split& test, bool mixed, int64_t& skipped) {
  manual_seed(0);
  auto model = nn::models::SimpleCNN(1, 10);
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  amp::GradScaler scaler({.enabled = mixed});
  const int64_t n = train.images.size(0), bs = 64;
  for (int64_t i = 0; i + bs <= n; i += bs) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard guard(kF16, mixed);
      loss = F::cross_entropy(model->forward(train.images.narrow(0, i, bs)), train.labels.narrow(0, i, bs));
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  }
  skipped = scaler.skipped_steps();
  return accuracy(*model, test, mixed);
}

}  // namespace

TEST_CASE("amp Fashion-MNIST: SimpleCNN under autocast f16 + GradScaler matches f32 accuracy within 0.5 pp") {
  const Split train = load("train", 6000), test = load("t10k", 5000);
  int64_t skipped32 = 0, skipped16 = 0;
  const double acc32 = train_and_score(train, test, false, skipped32);
  const double acc16 = train_and_score(train, test, true, skipped16);
  MESSAGE("test accuracy after one epoch on 6k images: f32 ", acc32, "%, autocast f16 + GradScaler ", acc16, "% (",
          skipped16, " steps skipped)");
  CHECK(acc32 > 75.0);  // it learnt something
  CHECK(std::abs(acc16 - acc32) <= 0.5);
  CHECK(skipped32 == 0);
  CHECK(skipped16 < 5);
}
