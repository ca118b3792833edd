// make_data, the loaders, make_model, make_optimizer, make_schedule: options into objects.
#include "tools/mdl_train/setup.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "data/cifar.h"
#include "data/class_subset.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/subset.h"
#include "data/text.h"
#include "nn/layers.h"
#include "nn/models/models.h"
#include "ops/native/factory.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace mdl::train {
namespace {

namespace fs = std::filesystem;

std::string after_colon(const std::string& s) {
  auto at = s.find(':');
  return at == std::string::npos ? "" : s.substr(at + 1);
}

// --classes: each entry a class name of the data, else an index into its classes.
std::vector<int64_t> resolve_classes(const std::vector<std::string>& wanted, const DataBundle& d) {
  const auto& names = d.class_names;
  std::vector<int64_t> ids;
  for (const std::string& w : wanted) {
    int64_t id = std::find(names.begin(), names.end(), w) - names.begin();
    if (id == int64_t(names.size())) {
      const char* end = w.data() + w.size();
      auto [p, ec] = std::from_chars(w.data(), end, id);
      if (ec != std::errc() || p != end) {
        std::string known;
        for (size_t i = 0; i < names.size() && i < 20; ++i) known += (i ? ", " : "") + names[i];
        if (names.size() > 20) known += ", ... (" + std::to_string(names.size()) + " in all)";
        throw UsageError("mdl-train: --classes: '" + w + "' is not a class of " + d.description + "; its classes are " +
                         known);
      }
      if (id < 0 || id >= int64_t(names.size()))
        throw UsageError("mdl-train: --classes: class " + w + " is not in " + d.description + ", which has " +
                         std::to_string(names.size()) + " classes (0 to " + std::to_string(names.size() - 1) + ")");
    }
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      throw UsageError("mdl-train: --classes names class " + std::to_string(id) + " (" + names[size_t(id)] + ") twice");
    ids.push_back(id);
  }
  return ids;
}

data::TransformPtr normalized(std::vector<double> mean, std::vector<double> std) {
  return std::make_shared<data::Compose>(std::vector<data::TransformPtr>{
      std::make_shared<data::ToTensor>(), std::make_shared<data::Normalize>(std::move(mean), std::move(std))});
}

}  // namespace

DataBundle make_data(const TrainOptions& o) {
  DataBundle d;
  const std::string kind = o.data.substr(0, o.data.find(':')), path = after_colon(o.data);
  if (kind == "fashion-mnist") {
    const std::string root = path.empty() ? data::kFashionMnistRoot : path;
    d.train = std::make_shared<data::FashionMNIST>(root, true);
    d.test = std::make_shared<data::FashionMNIST>(root, false);
    d.transform = normalized({0.2860}, {0.3530});  // Fashion-MNIST's training-set mean and std
    d.class_names = data::FashionMNIST::classes();
    d.description = "Fashion-MNIST (" + root + ")";
  } else if (kind == "cifar10") {
    d.train = std::make_shared<data::Cifar10Binary>(path, true);
    d.test = std::make_shared<data::Cifar10Binary>(path, false);
    d.transform = normalized({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616});
    d.class_names = data::Cifar10Binary::classes();
    d.channels = 3, d.image_size = 32;
    d.description = "CIFAR-10 (" + path + ")";
  } else if (kind == "cifar100" || kind == "cifar100-coarse") {
    const auto labels = kind == "cifar100" ? data::Cifar100Labels::Fine : data::Cifar100Labels::Coarse;
    auto train = std::make_shared<data::Cifar100Binary>(path, true, labels);
    d.train = train;
    d.test = std::make_shared<data::Cifar100Binary>(path, false, labels);
    d.transform = normalized({0.5071, 0.4865, 0.4409}, {0.2673, 0.2564, 0.2762});
    d.class_names = train->classes();
    d.description = std::string(kind == "cifar100" ? "CIFAR-100" : "CIFAR-100 superclasses") + " (" + path + ")";
  } else if (kind == "imagefolder") {
    // PATH/train and PATH/test when both exist, else PATH for training and no validation.
    const bool split = fs::is_directory(fs::path(path) / "train") && fs::is_directory(fs::path(path) / "test");
    auto train = std::make_shared<data::ImageFolder>(split ? (fs::path(path) / "train").string() : path);
    d.train = train;
    if (split) {
      auto test = std::make_shared<data::ImageFolder>((fs::path(path) / "test").string());
      MDL_CHECK(test->classes() == train->classes(), (fs::path(path) / "test").string(), " has ",
                test->classes().size(), " class folders and ", (fs::path(path) / "train").string(), " has ",
                train->classes().size(), ", or their names differ: a label would mean another class in each");
      d.test = test;
    }
    d.class_names = train->classes();
    d.transform = normalized({0.5}, {0.5});
    d.description = "ImageFolder " + path;
  } else if (kind == "text") {
    auto text = std::make_shared<data::TextDataset>(path, o.context);
    d.train = text;
    d.vocab = text->vocab_size(), d.context = o.context;
    d.description = "text " + path + " (" + std::to_string(text->tokens().size()) + " characters, vocabulary " +
                    std::to_string(d.vocab) + ")";
    d.classes = d.vocab;
  } else {
    throw UsageError("mdl-train: unknown --data kind '" + kind + "'");
  }
  if (kind != "text") {
    const Tensor x = d.train->get(0).x;  // u8 (H, W, C) or (H, W)
    MDL_CHECK(x.dim() == 2 || x.dim() == 3, d.description, " gives samples of shape ", shape_str(x.shape()),
              ", expected an image (H, W[, C])");
    MDL_CHECK(x.size(0) == x.size(1), d.description, " has ", x.size(0), "x", x.size(1),
              " images; the zoo models expect square ones");
    d.image_size = x.size(0);
    d.channels = x.dim() == 3 ? x.size(2) : 1;
    if (d.transform && d.channels == 3 && kind == "imagefolder")
      d.transform = normalized({0.5, 0.5, 0.5}, {0.5, 0.5, 0.5});
    d.classes = int64_t(d.class_names.size());
  }
  if (!o.classes.empty()) {
    const std::vector<int64_t> ids = resolve_classes(o.classes, d);
    d.train = std::make_shared<data::ClassSubset>(d.train, ids);
    if (d.test) d.test = std::make_shared<data::ClassSubset>(d.test, ids);
    std::vector<std::string> kept;
    for (int64_t id : ids) kept.push_back(d.class_names[size_t(id)]);
    d.class_names = kept;
    d.classes = int64_t(ids.size());
    d.description += ", " + std::to_string(ids.size()) + " of its classes";
  }
  d.train_transform = d.transform;
  if (o.augment && d.transform) {
    d.train_transform = std::make_shared<data::Compose>(std::vector<data::TransformPtr>{
        std::make_shared<data::RandomCrop>(d.image_size, std::max<int64_t>(1, d.image_size / 8)),
        std::make_shared<data::RandomHorizontalFlip>(), d.transform});
  }
  if (o.augment && d.transform) d.description += ", augmented (random crop, horizontal flip)";
  // An ImageFolder lists its samples class by class: a prefix would hold only the first classes.
  const data::Subset::Pick pick = kind == "imagefolder" ? data::Subset::Pick::Spread : data::Subset::Pick::First;
  if (o.subset > 0) d.train = std::make_shared<data::Subset>(d.train, o.subset, pick);
  if (o.val_subset > 0 && d.test) d.test = std::make_shared<data::Subset>(d.test, o.val_subset, pick);
  return d;
}

data::LoaderOptions make_loader_options(const TrainOptions& o, const DataBundle& d) {
  data::LoaderOptions lo;
  lo.batch_size = o.batch, lo.shuffle = true, lo.num_workers = int(o.workers), lo.prefetch = int(o.prefetch);
  lo.cache = o.cache == "memory" ? data::Cache::Memory : o.cache == "file" ? data::Cache::File : data::Cache::None;
  lo.cache_dir = o.cache_dir, lo.pin_memory = o.pin_memory, lo.seed = o.seed;
  // The workers' OpenMP threads: their share of --threads, else one each (the training step has the cores).
  if (o.threads > 0 && o.workers > 0) lo.worker_threads = int(std::clamp<int64_t>(o.threads / o.workers, 1, 1024));
  lo.transform = d.train_transform;
  if (o.copy_stream) lo.device = parse_device(o.device);  // batches arrive on the GPU
  return lo;
}

std::unique_ptr<data::DataLoader> make_validation_loader(const TrainOptions& o, const DataBundle& d,
                                                         const data::LoaderOptions& train) {
  if (!d.test) return nullptr;
  data::LoaderOptions vo = train;
  vo.batch_size = std::max<int64_t>(o.batch, 256), vo.shuffle = false, vo.sampler = nullptr;
  vo.transform = d.transform;
  return std::make_unique<data::DataLoader>(*d.test, vo);
}

nn::ModulePtr make_model(const TrainOptions& o, const DataBundle& d) {
  namespace M = nn::models;
  if (o.model == "gpt") {
    MDL_CHECK(d.vocab > 0, "--model gpt needs text data");
    return std::make_shared<M::GPT>(
        M::GPTOptions{.vocab_size = d.vocab, .context = d.context, .n_layer = 4, .n_head = 4, .n_embd = 128});
  }
  MDL_CHECK(d.vocab == 0, "text data needs --model gpt");
  if (o.model == "mlp") return M::MLP(d.channels * d.image_size * d.image_size, {256, 128}, d.classes);
  if (o.model == "cnn" || o.model == "cnn-separable") {
    MDL_CHECK(d.image_size % 4 == 0, "--model ", o.model, " needs an image size divisible by 4, got ", d.image_size);
    if (o.model == "cnn-separable") return M::SeparableCNN(d.channels, d.classes, d.image_size);
    return M::SimpleCNN(d.channels, d.classes, d.image_size);
  }
  if (o.model == "resnet18") return M::resnet18(d.classes, d.channels);
  if (o.model == "resnet50") return M::resnet50(d.classes, d.channels);
  if (o.model == "efficientnet") return M::efficientnet_b0(d.classes, d.channels, true);
  if (o.model == "efficientnetv2") return M::efficientnet_v2_b0(d.classes, d.channels, true);
  if (o.model == "vit") {
    const int64_t patch = d.image_size % 7 == 0 ? 7 : 4;
    MDL_CHECK(d.image_size % patch == 0, "--model vit needs an image size divisible by 4 or 7, got ", d.image_size);
    return std::make_shared<M::ViT>(M::ViTOptions{.image_size = d.image_size,
                                                  .patch_size = patch,
                                                  .in_channels = d.channels,
                                                  .classes = d.classes});
  }
  throw UsageError("mdl-train: unknown --model '" + o.model + "'");
}

Tensor example_input(const DataBundle& d) {
  return d.vocab ? zeros({1, d.context}, kI64) : zeros({1, d.channels, d.image_size, d.image_size});
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, nn::Module& model) {
  auto groups = optim::param_groups_no_decay(model.named_parameters(), o.weight_decay);
  if (o.optimizer == "sgd")
    return std::make_unique<optim::SGD>(
        groups, optim::SGDOptions{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  if (o.optimizer == "adam")
    return std::make_unique<optim::Adam>(groups, optim::AdamOptions{.lr = o.lr, .weight_decay = o.weight_decay});
  return std::make_unique<optim::AdamW>(groups, optim::AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
}

std::unique_ptr<optim::LRScheduler> make_schedule(const TrainOptions& o, optim::Optimizer& opt,
                                                  int64_t steps_per_epoch) {
  const int64_t total = std::max<int64_t>(1, steps_per_epoch * o.epochs);
  if (o.schedule == "cosine") return std::make_unique<optim::CosineAnnealingLR>(opt, total);
  if (o.schedule == "restarts")
    return std::make_unique<optim::CosineAnnealingWarmRestarts>(opt, std::max<int64_t>(1, steps_per_epoch));
  if (o.schedule == "step") return std::make_unique<optim::StepLR>(opt, std::max<int64_t>(1, total / 3), 0.1);
  if (o.schedule == "warmup") {
    const int64_t warm = o.warmup_steps > 0 ? o.warmup_steps : std::max<int64_t>(1, total / 20);
    auto after = std::make_shared<optim::CosineAnnealingLR>(opt, std::max<int64_t>(1, total - warm));
    return std::make_unique<optim::LinearWarmup>(opt, warm, 0.0, after);
  }
  return nullptr;
}

std::vector<Tensor> dense_weights(nn::Module& model) {
  std::vector<Tensor> w;
  for (auto& [name, m] : model.named_modules())
    if (auto* linear = dynamic_cast<nn::Linear*>(m.get())) w.push_back(linear->weight);
  return w;
}

}  // namespace mdl::train
