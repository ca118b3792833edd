// cuda::Graph: captures the work queued on mdl's stream (relaxed mode, so the caching allocator
// may still cudaMalloc) into a CUDA Graph and replays it with one launch. The allocator keeps
// every block the capture touched reserved for the graph until the graph is destroyed.
#include "cuda/runtime/allocator.cuh"
#include "cuda/runtime/context.cuh"
#include "cuda/api.h"

namespace mdl::cuda {

struct Graph::Impl {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  int64_t token = 0;
  bool capturing = false;
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}

Graph::~Graph() {
  if (impl_->capturing) {  // abandoned mid-capture: end it so the stream is usable again
    cudaGraph_t g = nullptr;
    if (cudaStreamEndCapture(detail::stream(), &g) == cudaSuccess && g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    detail::allocator_end_capture();
  }
  if (impl_->exec) cudaGraphExecDestroy(impl_->exec);
  if (impl_->graph) cudaGraphDestroy(impl_->graph);
  if (impl_->token) {
    (void)cudaStreamSynchronize(detail::stream());  // a replay may still be running
    detail::allocator_release_graph(impl_->token);
  }
}

void Graph::capture_begin() {
  MDL_CHECK(is_available(), "cuda::Graph: no GPU found");
  MDL_CHECK(!impl_->capturing && !impl_->exec && !impl_->token,
            "cuda::Graph: capture_begin called twice on one graph (after a failed capture_end too: make a new Graph)");
  synchronize();
  impl_->token = detail::allocator_begin_capture();
  impl_->capturing = true;
  CUDA_CHECK("cuda::Graph", cudaStreamBeginCapture(detail::stream(), cudaStreamCaptureModeRelaxed));
}

void Graph::capture_end() {
  MDL_CHECK(impl_->capturing, "cuda::Graph: capture_end without capture_begin");
  impl_->capturing = false;
  detail::allocator_end_capture();
  CUDA_CHECK("cuda::Graph", cudaStreamEndCapture(detail::stream(), &impl_->graph));
  CUDA_CHECK("cuda::Graph", cudaGraphInstantiate(&impl_->exec, impl_->graph, 0));
}

void Graph::replay() {
  MDL_CHECK(impl_->exec, "cuda::Graph: replay before a finished capture");
  CUDA_CHECK("cuda::Graph", cudaGraphLaunch(impl_->exec, detail::stream()));
}

bool Graph::captured() const { return impl_->exec != nullptr; }

bool is_capturing() { return is_available() && detail::capturing(); }

}  // namespace mdl::cuda
