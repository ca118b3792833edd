// A character-level GPT on any UTF-8 text file, trained with train::Trainer, then asked to
// continue the text's first character for a few hundred more.
//   char_gpt FILE [EPOCHS] [SAMPLES] [CONTEXT]   (defaults: 1 epoch, every window (SAMPLES 0), context 64)
// Each sample is a window of CONTEXT characters and the same window one character on; the loss
// is the cross-entropy of every next character, over the (B, T, V) logits.
#include <cstdio>
#include <random>
#include <string>

#include "examples/args.h"
#include "mdl.h"

using namespace mdl;

// Samples `count` characters after `prompt`, each from the softmax of the last position's logits.
std::string generate(nn::models::GPT& model, const data::TextDataset& text, std::vector<int64_t> tokens, int64_t count,
                     uint64_t seed) {
  NoGradGuard no_grad;
  model.eval();
  std::mt19937_64 rng(seed);
  const int64_t context = model.opts.context;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = std::min<int64_t>(int64_t(tokens.size()), context);
    const std::vector<int64_t> window(tokens.end() - t, tokens.end());
    const Tensor logits = model.forward(from_vector(window, {1, t}));  // (1, t, V)
    const Tensor probs = softmax(logits.select(1, t - 1).reshape({-1}), 0);
    const std::vector<float> p = probs.to(kF32).to_vector<float>();
    tokens.push_back(std::discrete_distribution<int64_t>(p.begin(), p.end())(rng));
  }
  model.train();
  return text.decode(tokens);
}

int main(int argc, char** argv) try {
  const examples::Args args{argc, argv, "char_gpt", "FILE [EPOCHS] [SAMPLES] [CONTEXT]"};
  if (argc < 2) args.fail("no text file given");
  args.at_most(4);
  const int64_t epochs = args.count(2, "EPOCHS", 1, 1, 1'000'000);
  const int64_t samples = args.count(3, "SAMPLES", 0, 0, int64_t(1) << 40);
  const int64_t context = args.count(4, "CONTEXT", 64, 2, 1 << 20);
  manual_seed(0);
  auto text = std::make_shared<data::TextDataset>(argv[1], context);
  std::shared_ptr<const data::Dataset> train_set = text;
  if (samples > 0) train_set = std::make_shared<data::Subset>(train_set, samples);
  std::printf("%s: %zu characters, a vocabulary of %lld, %lld windows of %lld\n", argv[1], text->tokens().size(),
              (long long)text->vocab_size(), (long long)train_set->size(), (long long)context);

  auto model = std::make_shared<nn::models::GPT>(nn::models::GPTOptions{.vocab_size = text->vocab_size(),
                                                                        .context = context,
                                                                        .n_layer = 2,
                                                                        .n_head = 4,
                                                                        .n_embd = 64});
  train::Trainer trainer({
      .model = model,
      .optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 3e-3}),
      .train = std::make_shared<data::DataLoader>(*train_set, data::LoaderOptions{.batch_size = 32, .shuffle = true}),
      .clip = 1.0,
  });
  trainer.add(std::make_shared<train::ProgressPrinter>(stdout));
  const auto history = trainer.fit(epochs);

  std::printf("loss per character %.4f (uniform: %.4f)\n", history.back().train_loss,
              std::log(double(text->vocab_size())));
  std::printf("---\n%s\n---\n", generate(*model, *text, {text->tokens()[0]}, 200, 1).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "char_gpt: %s\n", e.what());
  return 1;
}
