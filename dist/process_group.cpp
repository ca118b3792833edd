// What every process group shares: the names of the reduce ops, for error messages.
#include "dist/process_group.h"

namespace mdl::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Average: return "average";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

}  // namespace mdl::dist
