// CIFAR binary reading: one record reader for both formats (size and label checks per file,
// planes reordered to HWC once), then the CIFAR-10 and CIFAR-100 datasets on top of it.
#include "data/cifar.h"

#include <cstring>
#include <filesystem>

#include "data/file_util.h"
#include "tensor/error.h"

namespace mdl::data {

namespace {
constexpr int64_t kSide = 32, kPlane = kSide * kSide, kPixels = 3 * kPlane;

// One label byte of a record: what it is called in errors and how many classes it counts.
struct LabelField {
  const char* name;
  int limit;
};

// Appends the records of `path` (one byte per field in `fields`, then 3 planes of 32x32) to
// `pixels` as (32, 32, 3) images, and their label bytes, fields.size() per record, to `labels`.
void read_records(const std::string& path, const char* who, const std::vector<LabelField>& fields,
                  std::vector<uint8_t>& pixels, std::vector<uint8_t>& labels) {
  const size_t label_bytes = fields.size(), record = label_bytes + size_t(kPixels);
  std::vector<uint8_t> bytes = read_file(path, who);
  MDL_CHECK(!bytes.empty() && bytes.size() % record == 0, who, ": '", path, "' is ", bytes.size(),
            " bytes, not a whole number of ", record, "-byte records (truncated at offset ",
            bytes.size() / record * record, "?)");
  const size_t records = bytes.size() / record, base = pixels.size() / size_t(kPixels);
  pixels.resize((base + records) * size_t(kPixels));
  labels.reserve(labels.size() + records * label_bytes);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * record;
    for (size_t f = 0; f < label_bytes; ++f) {
      MDL_CHECK(rec[f] < fields[f].limit, who, ": '", path, "' has ", fields[f].name, " ", int(rec[f]), " at offset ",
                r * record + f, " (expected 0 to ", fields[f].limit - 1, ")");
      labels.push_back(rec[f]);
    }
    const uint8_t* planes = rec + label_bytes;                    // (3, 32, 32)
    uint8_t* out = pixels.data() + (base + r) * size_t(kPixels);  // (32, 32, 3)
    for (int64_t p = 0; p < kPlane; ++p)
      for (int64_t c = 0; c < 3; ++c) out[p * 3 + c] = planes[c * kPlane + p];
  }
}

Tensor image_at(const std::vector<uint8_t>& pixels, int64_t index) {
  Tensor x = make_tensor({kSide, kSide, 3}, kU8, Device::cpu());
  std::memcpy(x.raw_data(), pixels.data() + index * kPixels, size_t(kPixels));
  return x;
}
}  // namespace

Cifar10Binary::Cifar10Binary(const std::string& root, bool train) {
  std::vector<std::string> names;
  if (train)
    for (int b = 1; b <= 5; ++b) names.push_back("data_batch_" + std::to_string(b) + ".bin");
  else names.push_back("test_batch.bin");
  identity_ = "Cifar10Binary(";
  for (const std::string& name : names) {
    const std::string path = (std::filesystem::path(root) / name).string();
    read_records(path, "Cifar10Binary", {{"label", 10}}, pixels_, labels_);
    identity_ += file_stamp(path, "Cifar10Binary") + ",";
  }
  identity_ += ")";
}

Sample Cifar10Binary::get(int64_t index) const {
  check_index("Cifar10Binary::get", index, size());
  return {image_at(pixels_, index), label_tensor(labels_[size_t(index)])};
}

int64_t Cifar10Binary::label(int64_t index) const {
  check_index("Cifar10Binary::label", index, size());
  return labels_[size_t(index)];
}

const std::vector<std::string>& Cifar10Binary::classes() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                 "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

Cifar100Binary::Cifar100Binary(const std::string& root, bool train, Cifar100Labels labels) : kind_(labels) {
  const std::string path = (std::filesystem::path(root) / (train ? "train.bin" : "test.bin")).string();
  std::vector<uint8_t> both;  // (coarse, fine) per record
  read_records(path, "Cifar100Binary", {{"coarse label", 20}, {"fine label", 100}}, pixels_, both);
  const size_t kept = kind_ == Cifar100Labels::Coarse ? 0 : 1;
  labels_.resize(both.size() / 2);
  for (size_t r = 0; r < labels_.size(); ++r) labels_[r] = both[2 * r + kept];
  identity_ = std::string("Cifar100Binary(") + (kind_ == Cifar100Labels::Coarse ? "coarse," : "fine,") +
              file_stamp(path, "Cifar100Binary") + ")";
}

Sample Cifar100Binary::get(int64_t index) const {
  check_index("Cifar100Binary::get", index, size());
  return {image_at(pixels_, index), label_tensor(labels_[size_t(index)])};
}

int64_t Cifar100Binary::label(int64_t index) const {
  check_index("Cifar100Binary::label", index, size());
  return labels_[size_t(index)];
}

const std::vector<std::string>& Cifar100Binary::classes() const {
  return kind_ == Cifar100Labels::Coarse ? coarse_classes() : fine_classes();
}

// The label names of the data set's meta file (fine_label_names, coarse_label_names), in label order.
const std::vector<std::string>& Cifar100Binary::fine_classes() {
  static const std::vector<std::string> names = {
      "apple",      "aquarium_fish", "baby",         "bear",       "beaver",      "bed",         "bee",
      "beetle",     "bicycle",       "bottle",       "bowl",       "boy",         "bridge",      "bus",
      "butterfly",  "camel",         "can",          "castle",     "caterpillar", "cattle",      "chair",
      "chimpanzee", "clock",         "cloud",        "cockroach",  "couch",       "crab",        "crocodile",
      "cup",        "dinosaur",      "dolphin",      "elephant",   "flatfish",    "forest",      "fox",
      "girl",       "hamster",       "house",        "kangaroo",   "keyboard",    "lamp",        "lawn_mower",
      "leopard",    "lion",          "lizard",       "lobster",    "man",         "maple_tree",  "motorcycle",
      "mountain",   "mouse",         "mushroom",     "oak_tree",   "orange",      "orchid",      "otter",
      "palm_tree",  "pear",          "pickup_truck", "pine_tree",  "plain",       "plate",       "poppy",
      "porcupine",  "possum",        "rabbit",       "raccoon",    "ray",         "road",        "rocket",
      "rose",       "sea",           "seal",         "shark",      "shrew",       "skunk",       "skyscraper",
      "snail",      "snake",         "spider",       "squirrel",   "streetcar",   "sunflower",   "sweet_pepper",
      "table",      "tank",          "telephone",    "television", "tiger",       "tractor",     "train",
      "trout",      "tulip",         "turtle",       "wardrobe",   "whale",       "willow_tree", "wolf",
      "woman",      "worm"};
  return names;
}

const std::vector<std::string>& Cifar100Binary::coarse_classes() {
  static const std::vector<std::string> names = {"aquatic_mammals",
                                                 "fish",
                                                 "flowers",
                                                 "food_containers",
                                                 "fruit_and_vegetables",
                                                 "household_electrical_devices",
                                                 "household_furniture",
                                                 "insects",
                                                 "large_carnivores",
                                                 "large_man-made_outdoor_things",
                                                 "large_natural_outdoor_scenes",
                                                 "large_omnivores_and_herbivores",
                                                 "medium_mammals",
                                                 "non-insect_invertebrates",
                                                 "people",
                                                 "reptiles",
                                                 "small_mammals",
                                                 "trees",
                                                 "vehicles_1",
                                                 "vehicles_2"};
  return names;
}

}  // namespace mdl::data
