// The blocks of rows a per-column sum over many rows is taken in (a bias or norm parameter's
// gradient): each block sums its rows in order, then the blocks' sums are added in order. The split
// depends on the row count alone, so the sums' bits do not depend on the thread count, while the
// threads share the blocks and each reads whole rows.
#pragma once
#include <algorithm>
#include <cstdint>

namespace mdl::cpu {

// At least 64 rows a block and at most 256 blocks.
inline int64_t sum_block_rows(int64_t rows) { return std::max<int64_t>(64, (rows + 255) / 256); }

}  // namespace mdl::cpu
