// mdl-study's command line: it is steered by STUDY_* environment variables alone; --help (or -h)
// lists them, and any other argument is refused rather than ignored (a study runs for hours).
#pragma once
#include <string>
#include <vector>

namespace mdl::train {

// The usage text: every STUDY_* variable, what it means and its default.
std::string study_usage();

// The arguments after the program name: true for a lone --help or -h, false for none; throws
// UsageError naming anything else.
bool study_wants_help(const std::vector<std::string>& args);

}  // namespace mdl::train
