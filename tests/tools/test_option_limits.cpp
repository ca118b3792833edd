// mdl-train's options reject values that would overflow or break later arithmetic: non-finite
// reals, integers past a ceiling (or past the type's range: said to be out of range, not "not a
// number"), device indices no machine has. Each is a UsageError (exit 2).
#include <doctest/doctest.h>

#include "tools/mdl_train/options.h"

using namespace mdl;

namespace {

train::TrainOptions parse(std::vector<std::string> args) { return train::parse_train_options(args); }

void refused(std::vector<std::string> args, const std::string& says) {
  CAPTURE(args[0]);
  CAPTURE(args[1]);
  CHECK_THROWS_WITH_AS(parse(args), doctest::Contains(says.c_str()), train::UsageError);
}

}  // namespace

TEST_CASE("options: non-finite and out-of-range values are usage errors") {
  refused({"--lr", "inf"}, "--lr must be a finite number, got inf");
  refused({"--lr", "nan"}, "--lr must be a finite number");
  refused({"--lr", "1e300"}, "--lr must be in [0, 1e+06]");
  refused({"--momentum", "-0.5"}, "--momentum must be in");
  refused({"--bucket-mb", "inf"}, "--bucket-mb must be a finite number");
  refused({"--bucket-mb", "1e30"}, "--bucket-mb must be in");
  refused({"--bucket-mb", "0"}, "--bucket-mb must be in (0, ");
  refused({"--batch", "9223372036854775807"}, "--batch must be in [1, 16777216]");
  refused({"--batch", "99999999999999999999"},
          "--batch must be in [1, 16777216], got 99999999999999999999 (out of range)");
  refused({"--epochs", "99999999999999999999"},
          "--epochs must be in [1, 1000000], got 99999999999999999999 (out of range)");
  refused({"--lr", "1e400"}, "--lr must be in [0, 1e+06], got 1e400 (out of range)");
  refused({"--seed", "99999999999999999999"},
          "--seed must be in [0, 2^64 - 1], got 99999999999999999999 (out of range)");
  refused({"--target-accuracy", "1.5"}, "--target-accuracy must be in (0, 1], got 1.5");
  refused({"--target-accuracy", "0"}, "--target-accuracy must be in (0, 1], got 0");
  refused({"--threads", "100000000"}, "--threads must be in [0, 1024]");
  refused({"--workers", "5000"}, "--workers must be in [0, 1024]");
  refused({"--epochs", "0"}, "--epochs must be in [1,");
  refused({"--device", "cuda:99999999999"}, "cuda:N with N in [0, 1023]");
  refused({"--device", "cuda:-1"}, "cuda:N with N in [0, 1023]");
  refused({"--device", "cuda:"}, "cuda:N with N in [0, 1023]");
  refused({"--device", "cuda:1x"}, "cuda:N with N in [0, 1023]");
  refused({"--device", "gpu"}, "must be cpu, cuda or cuda:N");

  CHECK(parse({"--device", "cuda:3"}).device == "cuda:3");
  CHECK(parse({"--lr", "0.5", "--batch", "16777216", "--threads", "1024"}).batch == 16777216);
#ifdef MDL_WITH_MPI
  CHECK(parse({"--dist", "--bucket-mb", "0.5"}).bucket_mb == 0.5);
#endif
}
