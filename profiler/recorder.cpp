// Per-thread event buffers. A thread attaches to the recording session on its first event
// (one mutex lock per thread per session); after that it appends without locks: each buffer
// is a list of fixed chunks whose filled length is published with a release store, so stop()
// can read every completed event while late ranges on other threads are still closing.
#include "profiler/recorder.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "profiler/cost.h"
#include "profiler/device_timer.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace mdl::profiler::detail {

namespace {

// Append-only storage that one thread writes and another may read concurrently.
template <class T>
class ChunkList {
 public:
  static constexpr size_t kChunk = 512;
  ChunkList() : head_(new Chunk), tail_(head_) {}
  ~ChunkList() {
    for (Chunk* c = head_; c;) delete std::exchange(c, c->next);
  }
  ChunkList(const ChunkList&) = delete;
  ChunkList& operator=(const ChunkList&) = delete;

  void push(const T& v) {  // owner thread only
    if (tail_used_ == kChunk) {
      tail_->next = new Chunk;
      tail_ = tail_->next;
      tail_used_ = 0;
    }
    tail_->items[tail_used_++] = v;
    published_.store(published_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void append_to(std::vector<T>& out) const {  // any thread: the items published so far
    size_t n = published_.load(std::memory_order_acquire);
    for (const Chunk* c = head_; c && n; c = c->next)
      for (size_t i = 0; i < kChunk && n; ++i, --n) out.push_back(c->items[i]);
  }

 private:
  struct Chunk {
    T items[kChunk];
    Chunk* next = nullptr;
  };
  Chunk* head_;
  Chunk* tail_;
  size_t tail_used_ = 0;
  std::atomic<size_t> published_{0};
};

struct ThreadBuffer {
  ThreadInfo info;
  ChunkList<Event> events;
  ChunkList<MemoryEvent> memory;
};

struct Registry {
  std::mutex mu;
  bool active = false;
  uint64_t generation = 0;
  Config config;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may outlive static destruction
  return *r;
}
std::atomic<uint64_t> g_generation{0};

// What a thread keeps between events: its buffer for the current session and its open ranges.
struct ThreadState {
  uint64_t generation = 0;
  std::shared_ptr<ThreadBuffer> buffer;
  Config config;
  std::vector<Event> open;
  std::string name;  // set_current_thread_name()
};
thread_local ThreadState t_state;

// The calling thread's state for the recording session, attaching on first use; null when none records.
ThreadState* attach() {
  ThreadState& st = t_state;
  if (st.buffer && st.generation == g_generation.load(std::memory_order_acquire)) return &st;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (!r.active) return nullptr;
  st.generation = r.generation;
  st.config = r.config;
  st.open.clear();  // ranges left open by an earlier session are dropped
  st.buffer = std::make_shared<ThreadBuffer>();
  st.buffer->info.tid = uint32_t(r.buffers.size());
  st.buffer->info.name = !st.name.empty()           ? st.name
                         : st.buffer->info.tid == 0 ? "main"
                                                    : "thread " + std::to_string(st.buffer->info.tid);
  r.buffers.push_back(st.buffer);
  return &st;
}

std::atomic<DeviceTimer*> g_device_timer{nullptr};

}  // namespace

int64_t clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool open_range(const char* name, EventKind kind, Device device) {
  ThreadState* st = attach();
  if (!st || (kind == EventKind::Module && !st->config.modules)) return false;
  Event& e = st->open.emplace_back();
  e.name = name;
  e.kind = kind;
  e.device = device;
  e.tid = st->buffer->info.tid;
  e.start_ns = clock_ns() - st->config.t0_ns;
  return true;
}

void close_range() {
  ThreadState& st = t_state;
  if (st.open.empty()) return;  // opened under a session that has since been replaced
  const int64_t end = clock_ns() - st.config.t0_ns;
  Event& e = st.open.back();
  if (e.device_token)
    if (DeviceTimer* timer = g_device_timer.load(std::memory_order_acquire)) timer->stop(e.device_token);
  e.end_ns = end;
  st.buffer->events.push(e);
  st.open.pop_back();
}

KernelRange::KernelRange(const char* name, const Device& device, const KernelArg* args, int count) {
  open_ = open_range(name, EventKind::Kernel, device);
  if (!open_) return;
  ThreadState& st = t_state;
  Event& e = st.open.back();
  e.flops = kernel_flops(name, args, count);
  e.bytes = kernel_bytes(name, args, count);
  if (const Tensor* t = compute_operand(name, args, count)) e.dtype = t->dtype();
  if (st.config.record_shapes) {
    for (int i = 0; i < count && e.n_shapes < Event::kMaxShapes; ++i) {
      const Tensor* t = args[i].tensor;
      if (!t || !t->defined()) continue;
      ShapeRecord& s = e.shapes[e.n_shapes++];
      s.dtype = t->dtype();
      s.ndim = uint8_t(t->dim());
      for (int64_t d = 0; d < t->dim() && d < ShapeRecord::kMaxDims; ++d) s.dims[d] = t->size(d);
    }
  }
  if (device.is_cuda())
    if (DeviceTimer* timer = g_device_timer.load(std::memory_order_acquire)) e.device_token = timer->start(device);
  e.start_ns = clock_ns() - st.config.t0_ns;  // the bookkeeping above is not the kernel's time
}

KernelRange::~KernelRange() {
  if (open_) close_range();
}

const char* intern(std::string_view name) {
  static std::mutex mu;
  static auto* names = new std::unordered_set<std::string>;  // never freed: events point into it
  thread_local std::unordered_set<std::string_view> local;   // views of names already interned
  if (auto it = local.find(name); it != local.end()) return it->data();
  std::lock_guard lock(mu);
  const std::string& kept = *names->emplace(name).first;
  local.insert(kept);
  return kept.c_str();
}

const char* backward_name(const char* op) {
  thread_local std::vector<std::pair<const char*, const char*>> cache;  // op literal -> name
  for (auto& [key, value] : cache)
    if (key == op) return value;
  std::string_view s(op);
  const char* name = s == "AccumulateGrad" || s.ends_with("Backward") ? op : intern(std::string(s) + "Backward");
  cache.emplace_back(op, name);
  return name;
}

void record_memory(const Device& d, int64_t delta, int64_t live_after) {
  ThreadState* st = attach();
  if (!st || !st->config.memory) return;
  st->buffer->memory.push({clock_ns() - st->config.t0_ns, d, delta, live_after});
}

void start_recording(const Config& config) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    MDL_CHECK(!r.active, "profiler: a session is already recording; stop it before starting another");
    r.active = true;
    r.config = config;
    r.buffers.clear();
    g_generation.store(++r.generation, std::memory_order_release);
  }
  attach();  // the session's own thread is tid 0
  g_recording.store(true, std::memory_order_release);
}

Harvest stop_recording() {
  g_recording.store(false, std::memory_order_release);
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  Harvest h;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.active = false;
    buffers.swap(r.buffers);
    for (auto& b : buffers) h.threads.push_back(b->info);
  }
  for (auto& b : buffers) {
    b->events.append_to(h.events);
    b->memory.append_to(h.memory);
  }
  return h;
}

void set_current_thread_name(std::string name) {
  ThreadState& st = t_state;
  st.name = std::move(name);
  if (!st.buffer) return;
  std::lock_guard lock(registry().mu);  // stop() reads the name under this lock
  st.buffer->info.name = st.name;
}

}  // namespace mdl::profiler::detail

namespace mdl::profiler {

void set_device_timer(DeviceTimer* timer) {
  MDL_CHECK(!detail::recording(), "profiler: set_device_timer while a session records");
  detail::g_device_timer.store(timer, std::memory_order_release);
}
DeviceTimer* device_timer() { return detail::g_device_timer.load(std::memory_order_acquire); }

}  // namespace mdl::profiler
