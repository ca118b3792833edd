// Checkpoints: the weights file, and the training-state file whose tensors are named
// "optimizer.*" and "scaler.*" and whose metadata records the epoch, the weights file's size and
// CRC-32 (the two belong together only when these match), and the callbacks' state under
// "callback.". Saving stages both files completely before it renames either (checkpoint.h).
#include "train/checkpoint.h"

#include <charconv>
#include <filesystem>
#include <limits>
#include <optional>
#include <vector>

#include "io/safetensors.h"
#include "ops/native/factory.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"
#include "train/checkpoint_files.h"

namespace mdl::train {

namespace detail {
std::function<void(std::string_view step)> checkpoint_step_hook;
}  // namespace detail

namespace {

using namespace checkpoint_files;

constexpr int64_t kMaxEpoch = std::numeric_limits<int32_t>::max();
constexpr std::string_view kCallbackPrefix = "callback.";

void reached(std::string_view step) {
  if (detail::checkpoint_step_hook) detail::checkpoint_step_hook(step);
}

const std::string& require(const io::Metadata& meta, const std::string& key, const std::string& file) {
  const std::string* v = io::find_metadata(meta, key);
  MDL_CHECK(v, "resume: '", file, "' records no \"", key, "\" (not a checkpoint written by this version of mdl-train)");
  return *v;
}

// Whole text as a number in [lo, hi], in base 10 or 16; nothing else (no sign, spaces or suffix).
bool parse(const std::string& text, uint64_t lo, uint64_t hi, int base, uint64_t& out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out, base);
  return ec == std::errc() && p == end && out >= lo && out <= hi;
}

// The state file's contents when its recorded digest is `weights`'s; none for a missing or
// unreadable file or another digest.
std::optional<io::SafetensorsContents> read_if_written_for(const std::string& state_file, const FileDigest& weights) {
  if (!std::filesystem::exists(state_file)) return std::nullopt;
  try {
    io::SafetensorsContents state = io::read_safetensors(state_file);
    const std::string* bytes_text = io::find_metadata(state.metadata, "model_bytes");
    const std::string* crc_text = io::find_metadata(state.metadata, "model_crc32");
    uint64_t bytes = 0, crc = 0;
    if (bytes_text && crc_text && parse(*bytes_text, 0, std::numeric_limits<uint64_t>::max(), 10, bytes) &&
        crc_text->size() == 8 && parse(*crc_text, 0, 0xffffffffu, 16, crc) && bytes == weights.bytes &&
        crc == weights.crc)
      return state;
  } catch (const Error&) {}
  return std::nullopt;
}

// The state file, or, when it is missing or belongs to other weights, a staged state file written
// for `weights`: a save interrupted between its renames, whose commit this completes. Null when
// neither (the caller's checks then name what is wrong with the state file).
std::optional<io::SafetensorsContents> recover_state(const std::string& state_file, const FileDigest& weights) {
  if (auto state = read_if_written_for(state_file, weights)) return state;
  for (const std::string& staged : staged_versions(state_file)) {
    if (auto state = read_if_written_for(staged, weights)) {
      try {
        rename_durably(staged, state_file);
      } catch (const Error&) {  // a read-only directory: the staged file serves as it is
      }
      return state;
    }
  }
  return std::nullopt;
}

}  // namespace

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& opt,
                     const amp::GradScaler& scaler, int64_t epoch, const io::Metadata& tags,
                     const optim::LRScheduler* schedule, const io::Metadata& callback_state) {
  const std::string state_file = state_path(path);
  const std::string weights_staged = staged_path(path), state_staged = staged_path(state_file);
  io::Metadata meta = {{"epoch", std::to_string(epoch)}};
  meta.insert(meta.end(), tags.begin(), tags.end());
  try {
    io::save_safetensors(weights_staged, model.state_dict(), meta);
    reached("weights staged");
    const FileDigest weights = digest(weights_staged);
    io::Metadata state_meta = meta;
    state_meta.emplace_back("model_bytes", std::to_string(weights.bytes));
    state_meta.emplace_back("model_crc32", hex(weights.crc));
    state_meta.emplace_back("optimizer", opt.name());
    state_meta.emplace_back("rng_seed", std::to_string(default_generator().seed()));
    state_meta.emplace_back("rng_offset", std::to_string(default_generator().offset()));
    if (schedule) state_meta.emplace_back("schedule_epoch", std::to_string(schedule->last_epoch()));
    for (const auto& [key, value] : callback_state) state_meta.emplace_back(std::string(kCallbackPrefix) + key, value);
    NamedTensors state;
    for (auto& [n, t] : opt.state_dict()) state.emplace_back("optimizer." + n, t);
    for (auto& [n, t] : scaler.state_dict()) state.emplace_back("scaler." + n, t);
    io::save_safetensors(state_staged, state, state_meta);
    reached("state staged");
  } catch (...) {  // a failed save (a full disk): the previous pair stays, without debris
    std::error_code ec;
    std::filesystem::remove(weights_staged, ec);
    std::filesystem::remove(state_staged, ec);
    throw;
  }
  rename_durably(weights_staged, path);
  reached("weights renamed");
  rename_durably(state_staged, state_file);
  reached("state renamed");
  remove_abandoned(path);
}

int64_t resume_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler,
                          optim::LRScheduler* schedule, int64_t steps_per_epoch, io::Metadata* callback_state) {
  const std::string state_file = state_path(path);
  MDL_CHECK(std::filesystem::exists(path), "resume: the checkpoint '", path, "' does not exist");
  const FileDigest weights = digest(path);
  std::optional<io::SafetensorsContents> recovered = recover_state(state_file, weights);
  if (!recovered)
    MDL_CHECK(std::filesystem::exists(state_file), "resume: the training-state file '", state_file,
              "' (the optimizer and scaler state and the epoch) is missing beside '", path,
              "'; without it the run cannot continue where it stopped");
  // Everything is read and checked before the model, optimizer or scaler changes.
  const io::SafetensorsContents state = recovered ? std::move(*recovered) : io::read_safetensors(state_file);
  const std::string& epoch_text = require(state.metadata, "epoch", state_file);
  uint64_t epoch = 0, bytes = 0, crc = 0;
  MDL_CHECK(parse(epoch_text, 1, kMaxEpoch, 10, epoch), "resume: '", state_file, "' records epoch '", epoch_text,
            "'; expected a whole number from 1 to ", kMaxEpoch);
  const std::string& bytes_text = require(state.metadata, "model_bytes", state_file);
  const std::string& crc_text = require(state.metadata, "model_crc32", state_file);
  MDL_CHECK(parse(bytes_text, 0, std::numeric_limits<uint64_t>::max(), 10, bytes) && crc_text.size() == 8 &&
                parse(crc_text, 0, 0xffffffffu, 16, crc),
            "resume: '", state_file, "' records the weights file as '", bytes_text, "' bytes with CRC-32 '", crc_text,
            "'; expected a byte count and 8 hex digits");
  MDL_CHECK(weights.bytes == bytes && weights.crc == crc, "resume: '", path, "' and '", state_file,
            "' do not belong together: the state file was written for weights of ", bytes, " bytes with CRC-32 ",
            crc_text, ", the weights file has ", weights.bytes, " bytes with CRC-32 ", hex(weights.crc),
            " (files of different runs, or a torn pair that no staged state file completes)");
  const io::SafetensorsContents weights_file = io::read_safetensors(path);
  const std::string* weights_epoch = io::find_metadata(weights_file.metadata, "epoch");
  MDL_CHECK(weights_epoch && *weights_epoch == epoch_text, "resume: '", path, "' records epoch '",
            weights_epoch ? *weights_epoch : "", "' but '", state_file, "' epoch '", epoch_text, "'");
  // The state of another optimizer would load (the option and buffer names are shared) and train
  // with SGD's momentum as Adam's moments. A state file without the name predates it: taken as is.
  if (const std::string* kind = io::find_metadata(state.metadata, "optimizer"))
    MDL_CHECK(*kind == opt.name(), "resume: '", state_file, "' holds the state of a ", *kind,
              " optimizer; this run's optimizer is ", opt.name());
  // The generator's state and the schedule's position, read before anything changes. Files that
  // predate them resume without (the generator as the run seeded it).
  uint64_t rng_seed = 0, rng_offset = 0, schedule_epoch = 0;
  const std::string* seed_text = io::find_metadata(state.metadata, "rng_seed");
  const std::string* offset_text = io::find_metadata(state.metadata, "rng_offset");
  MDL_CHECK(!seed_text == !offset_text, "resume: '", state_file, "' records only one of rng_seed and rng_offset");
  if (seed_text)
    MDL_CHECK(parse(*seed_text, 0, std::numeric_limits<uint64_t>::max(), 10, rng_seed) &&
                  parse(*offset_text, 0, std::numeric_limits<uint64_t>::max(), 10, rng_offset),
              "resume: '", state_file, "' records the generator as seed '", *seed_text, "' offset '", *offset_text,
              "'; expected two whole numbers");
  if (schedule) {
    if (const std::string* text = io::find_metadata(state.metadata, "schedule_epoch"))
      MDL_CHECK(parse(*text, 0, uint64_t(std::numeric_limits<int64_t>::max()), 10, schedule_epoch), "resume: '",
                state_file, "' records the schedule's position as '", *text, "'; expected a whole number");
    else if (steps_per_epoch > 0) schedule_epoch = epoch * uint64_t(steps_per_epoch);
    else require(state.metadata, "schedule_epoch", state_file);  // refused, naming what is missing
  }
  NamedTensors optimizer_state, scaler_state;
  for (auto& [n, t] : state.tensors) {
    if (n.rfind("optimizer.", 0) == 0) optimizer_state.emplace_back(n.substr(10), t);
    else if (n.rfind("scaler.", 0) == 0) scaler_state.emplace_back(n.substr(7), t);
    else MDL_FAIL("resume: '", state_file, "' holds \"", n, "\", neither optimizer nor scaler state");
  }
  // Each loader checks all of its part before it applies any; the model's comes first, as the
  // likeliest to be refused (a checkpoint of another model). Should a later part be refused, the
  // earlier ones get their own state back: nothing is half loaded.
  NamedTensors model_before;
  {
    NoGradGuard no_grad;
    for (const auto& [n, t] : model.state_dict()) model_before.emplace_back(n, t.clone());
  }
  const NamedTensors opt_before = opt.state_dict();
  model.load_state_dict(weights_file.tensors);
  try {
    opt.load_state_dict(optimizer_state);
    if (!scaler_state.empty() && scaler.is_enabled()) scaler.load_state_dict(scaler_state);
  } catch (...) {
    model.load_state_dict(model_before);
    opt.load_state_dict(opt_before);
    throw;
  }
  if (seed_text) {
    default_generator().manual_seed(rng_seed);
    default_generator().set_offset(rng_offset);
  }
  if (schedule) schedule->set_epoch(int64_t(schedule_epoch));
  if (callback_state) {
    callback_state->clear();
    for (const auto& [key, value] : state.metadata)
      if (key.size() > kCallbackPrefix.size() && key.compare(0, kCallbackPrefix.size(), kCallbackPrefix) == 0)
        callback_state->emplace_back(key.substr(kCallbackPrefix.size()), value);
  }
  return int64_t(epoch);
}

}  // namespace mdl::train
