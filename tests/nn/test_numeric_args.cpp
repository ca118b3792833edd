// Numeric arguments that would give silent NaNs or wrong labels are refused with errors naming
// them: norm eps and batch-norm momentum, loaded batch-norm statistics, Normalize's mean and std,
// and an ImageFolder whose train and test splits have different classes.
#include <doctest/doctest.h>

#include <cmath>

#include "data/transforms.h"
#include "tests/support/data_test_util.h"
#include "mdl.h"
#include "nn/functional.h"
#include "tools/mdl_train/setup.h"

using namespace mdl;
namespace F = mdl::nn::functional;

TEST_CASE("norms: eps must be finite and >= 0, batch-norm momentum in [0, 1]") {
  Tensor x = randn({4, 3, 2, 2});
  Tensor rm = zeros({3}), rv = ones({3});
  for (double eps : {-1e-5, double(NAN), double(INFINITY)}) {
    CAPTURE(eps);
    CHECK_THROWS_WITH_AS(F::layer_norm(x, {2, 2}, {}, {}, eps), doctest::Contains("layer_norm: eps must be finite"),
                         Error);
    CHECK_THROWS_WITH_AS(F::group_norm(x, 3, {}, {}, eps), doctest::Contains("group_norm: eps must be finite"), Error);
    CHECK_THROWS_WITH_AS(F::batch_norm(x, rm, rv, {}, {}, true, 0.1, eps),
                         doctest::Contains("batch_norm: eps must be finite"), Error);
  }
  CHECK_THROWS_WITH_AS(F::batch_norm(x, rm, rv, {}, {}, true, 1.5, 1e-5),
                       doctest::Contains("momentum must be in [0, 1], got 1.5"), Error);
  CHECK_THROWS_WITH_AS(nn::BatchNorm2d(3, 1e-5, double(NAN)).forward(x), doctest::Contains("momentum"), Error);
  CHECK(F::layer_norm(x, {2, 2}, {}, {}, 0.0).defined());
}

TEST_CASE("load_state_dict: batch-norm statistics must be usable; a refused load changes nothing") {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Conv2d>(1, 2, 3));
  model->push_back(std::make_shared<nn::BatchNorm2d>(2));
  const NamedTensors before = model->state_dict();
  for (const auto& [entry, value] : std::vector<std::pair<std::string, double>>{{"1.running_var", -1.0},
                                                                                {"1.running_var", double(NAN)},
                                                                                {"1.running_mean", double(INFINITY)}}) {
    CAPTURE(entry);
    NamedTensors state;
    for (const auto& [name, t] : before) state.emplace_back(name, name == entry ? full(t.shape(), value) : t.clone());
    state[0].second = full(state[0].second.shape(), 7.0);  // a good value that must not be copied either
    CHECK_THROWS_WITH_AS(model->load_state_dict(state),
                         doctest::Contains(("load_state_dict: '" + entry + "': BatchNorm2d: loaded").c_str()), Error);
    for (size_t i = 0; i < before.size(); ++i)
      CHECK(model->state_dict()[i].second.to(kF64).to_vector<double>() ==
            before[i].second.to(kF64).to_vector<double>());
  }
}

TEST_CASE("Normalize: a NaN, infinite or zero std, or a non-finite mean, is refused") {
  CHECK_THROWS_WITH_AS(data::Normalize({0.5}, {double(NAN)}), doctest::Contains("std must be finite and nonzero"),
                       Error);
  CHECK_THROWS_WITH_AS(data::Normalize({0.5}, {double(INFINITY)}), doctest::Contains("std must be finite"), Error);
  CHECK_THROWS_WITH_AS(data::Normalize({0.5}, {0.0}), doctest::Contains("std must be finite and nonzero"), Error);
  CHECK_THROWS_WITH_AS(data::Normalize({double(NAN)}, {1.0}), doctest::Contains("mean must be finite"), Error);
}

TEST_CASE("mdl-train data: an ImageFolder's train and test splits must have the same classes") {
  data_test::TempDir dir("split_classes");
  data_test::make_image_folder(dir.path / "train", 3, 2, 8, 8, 1);
  data_test::make_image_folder(dir.path / "test", 2, 2, 8, 8, 1);
  train::TrainOptions o;
  o.data = "imagefolder:" + dir.path.string();
  CHECK_THROWS_WITH_AS(train::make_data(o), doctest::Contains("has 2 class folders and"), Error);
  data_test::make_image_folder(dir.path / "test", 3, 2, 8, 8, 1);
  CHECK(train::make_data(o).classes == 3);
}
