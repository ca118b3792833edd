// Image decoding (data/image, stb_image): the first byte picks the channels wanted (as stored, gray,
// RGB), the rest is the encoded file. Bad input must throw mdl::Error.
#include "data/image.h"
#include "fuzz/fuzz_util.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mdl;
  static constexpr data::Channels kChannels[] = {data::Channels::Keep, data::Channels::Gray, data::Channels::Rgb};
  fuzz::Bytes in{data, size};
  const data::Channels channels = kChannels[in.u8() % 3];
  try {
    data::decode_image(std::vector<uint8_t>(in.p, in.p + in.n), "fuzz", channels);
  } catch (const Error&) {}
  return 0;
}
