// The simulated device: see sim_runtime.hpp. One mutex and one condition variable guard all of its
// state (streams, events, allocations); a stream's worker runs each operation without the mutex.
// Everything global is created once and never destroyed: detached workers may still run at exit.
#include "gpu/sim/sim_runtime.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace {

using ckpt::simgpu::Op;

constexpr int kMaxDevices = 8;

/// `stream` has run its first `seq` operations.
struct Dep {
  std::shared_ptr<CUstream_st> stream;
  std::uint64_t seq;
};

/// Memory an operation reads or writes (for the check that nothing is freed under a queued copy).
struct Range {
  const std::uint8_t* p;
  std::size_t n;
};

struct Work {
  std::function<void()> body;  ///< nothing: a wait (deps only) or an operation recorded into a graph
  std::vector<Dep> deps;       ///< runs after these
  long delay_us = 0;           ///< injected: before the body reads or writes anything
  std::string what;            ///< for messages
  std::vector<Range> touches;
};

}  // namespace

struct CUstream_st {
  int device = 0;
  bool blocking = true;  ///< synchronises with the legacy default stream of its device
  bool legacy = false;
  bool destroyed = false;  ///< the handle is gone; the worker ends once the queue is empty
  bool capturing = false, capture_invalid = false;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::deque<Work> queue;  ///< front() is running while `running`
  bool running = false;
  std::uint64_t enqueued = 0, done = 0;
};

struct CUevent_st {
  bool timing = true;
  std::uint64_t gen = 0;  ///< records so far: the current generation
  std::shared_ptr<CUstream_st> stream;  ///< the current generation's stream (null: never recorded)
  std::uint64_t seq = 0;                ///< ... and its position there
  bool captured = false;                ///< the current generation was recorded into a graph
  long long done_ns = 0;                ///< when the current generation completed (timing)
};

struct CUgraph_st {};

namespace {

enum class Mem : std::uint8_t { device, managed, pinned, registered };

struct Alloc {
  std::size_t bytes;
  Mem kind;
  int device;
};

struct Config {
  int devices = 2;
  std::size_t max_pitch = (std::size_t{1} << 31) - 1;
  bool pools = true;
  std::size_t memory = std::size_t{1} << 30;
  long delay_us[4] = {0, 0, 0, 0};  // by Op
};

struct State {
  std::mutex mu;
  std::condition_variable cv;
  Config cfg;
  std::map<const std::uint8_t*, Alloc> allocs;  // by first byte
  std::size_t used[kMaxDevices] = {};
  std::set<std::shared_ptr<CUstream_st>> all;   // every stream whose worker runs
  std::map<CUstream_st*, std::shared_ptr<CUstream_st>> handles;  // made by cudaStreamCreate*, not destroyed
  std::shared_ptr<CUstream_st> legacy[kMaxDevices];
  std::map<CUevent_st*, std::shared_ptr<CUevent_st>> events;
  std::map<std::string, std::deque<std::pair<int, cudaError_t>>> injected;
  std::map<std::string, long> calls;
  int attachments[kMaxDevices] = {};
  std::deque<std::pair<std::uint8_t*, std::size_t>> quarantine;  // freed device memory, poisoned
  std::size_t quarantined = 0;
};

State& g() {
  static State* s = new State;
  return *s;
}

void retire(const std::shared_ptr<CUstream_st>& s);

/// The calling thread's side of the runtime.
struct ThreadState {
  int device = -1;  ///< none chosen yet
  cudaError_t last = cudaSuccess;
  unsigned attached = 0;  ///< devices this thread has had a context on (bits)
  std::map<int, std::shared_ptr<CUstream_st>> per_thread;  ///< cudaStreamPerThread, per device
  ~ThreadState() {
    std::lock_guard<std::mutex> lk(g().mu);
    for (auto& p : per_thread) retire(p.second);
  }
};
thread_local ThreadState t;

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "simgpu: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

long long now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

cudaError_t fail(cudaError_t e) {
  t.last = e;
  return e;
}

void attach(int d) {
  if ((t.attached & (1u << d)) == 0) {
    t.attached |= 1u << d;
    ++g().attachments[d];
  }
}

/// Counts the call and answers an injected error for it (mutex held).
cudaError_t enter(const char* call) {
  State& s = g();
  ++s.calls[call];
  auto it = s.injected.find(call);
  if (it == s.injected.end() || it->second.empty()) return cudaSuccess;
  auto& next = it->second.front();
  if (next.first-- > 0) return cudaSuccess;
  const cudaError_t e = next.second;
  it->second.pop_front();
  return e;
}

/// The thread's current device, making device 0 current (and attaching it) when the thread has none,
/// as CUDA does for any call that needs a context. -1 without devices.
int ctx() {
  if (g().cfg.devices == 0) return -1;
  if (t.device < 0) t.device = 0;
  attach(t.device);
  return t.device;
}

// The first lines of a runtime call: the mutex, the call counted, an injected error, a context.
#define SIM_CALL()                                               \
  std::unique_lock<std::mutex> lk(g().mu);                       \
  if (cudaError_t e_ = enter(__func__); e_ != cudaSuccess) return fail(e_)
#define SIM_CALL_CTX()                     \
  SIM_CALL();                              \
  const int dev = ctx();                   \
  if (dev < 0) return fail(cudaErrorNoDevice)

void work(std::shared_ptr<CUstream_st> s) {
  State& st = g();
  std::unique_lock<std::mutex> lk(st.mu);
  auto ready = [&] {
    if (s->queue.empty()) return s->destroyed;
    for (const Dep& d : s->queue.front().deps)
      if (d.stream->done < d.seq) return false;
    return true;
  };
  for (;;) {
    st.cv.wait(lk, ready);
    if (s->queue.empty()) break;
    Work& w = s->queue.front();  // a reference into the deque stays valid while others push_back
    s->running = true;
    lk.unlock();
    if (w.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(w.delay_us));
    if (w.body) w.body();
    lk.lock();
    s->queue.pop_front();
    s->running = false;
    ++s->done;
    st.cv.notify_all();
  }
  st.all.erase(s);
}

std::shared_ptr<CUstream_st> make_stream(int device, bool blocking, bool legacy) {
  auto s = std::make_shared<CUstream_st>();
  s->device = device;
  s->blocking = blocking;
  s->legacy = legacy;
  g().all.insert(s);
  std::thread([s] { work(s); }).detach();
  return s;
}

/// The handle gone; the work already enqueued still runs (cudaStreamDestroy returns at once).
void retire(const std::shared_ptr<CUstream_st>& s) {
  s->destroyed = true;
  g().cv.notify_all();
}

/// The stream a handle names (mutex held, `dev` current): nullptr and cudaStreamLegacy are the device's
/// legacy stream, cudaStreamPerThread this thread's; null for an unknown handle.
std::shared_ptr<CUstream_st> resolve(cudaStream_t h, int dev) {
  State& s = g();
  if (h == nullptr || h == cudaStreamLegacy) {
    if (!s.legacy[dev]) s.legacy[dev] = make_stream(dev, true, true);
    return s.legacy[dev];
  }
  if (h == cudaStreamPerThread) {
    auto& p = t.per_thread[dev];
    if (!p) p = make_stream(dev, true, false);
    return p;
  }
  auto it = s.handles.find(h);
  return it == s.handles.end() ? nullptr : it->second;
}

#define SIM_STREAM(var, handle)          \
  auto var = resolve((handle), dev);     \
  if (!var) return fail(cudaErrorInvalidResourceHandle)

/// A blocking stream of `dev` being captured in a mode that forbids the legacy stream.
CUstream_st* strict_capture_on(int dev) {
  for (const auto& p : g().all)
    if (p->device == dev && p->capturing && p->capture_mode != cudaStreamCaptureModeRelaxed && p->blocking)
      return p.get();
  return nullptr;
}

/// Enqueues `w` on `s` with the legacy stream's implicit synchronisation (mutex held); `seq` gets its
/// position. On a stream being captured the work is recorded into the graph: it never runs.
cudaError_t enqueue(const std::shared_ptr<CUstream_st>& s, Work w, std::uint64_t* seq = nullptr) {
  State& st = g();
  if (s->capturing) {
    if (seq != nullptr) *seq = 0;
    return cudaSuccess;
  }
  if (s->legacy) {
    if (CUstream_st* c = strict_capture_on(s->device)) {  // using the legacy stream would join that capture
      c->capture_invalid = true;
      return fail(cudaErrorStreamCaptureImplicit);
    }
    for (const auto& o : st.all)  // after everything enqueued so far on the device's blocking streams
      if (o->device == s->device && o->blocking && !o->legacy && o->done < o->enqueued)
        w.deps.push_back(Dep{o, o->enqueued});
  } else if (s->blocking) {
    const auto& l = st.legacy[s->device];  // after everything enqueued so far on the legacy stream
    if (l && l->done < l->enqueued) w.deps.push_back(Dep{l, l->enqueued});
  }
  s->queue.push_back(std::move(w));
  ++s->enqueued;
  if (seq != nullptr) *seq = s->enqueued;
  st.cv.notify_all();
  return cudaSuccess;
}

void wait_done(std::unique_lock<std::mutex>& lk, const std::shared_ptr<CUstream_st>& s, std::uint64_t seq) {
  g().cv.wait(lk, [&] { return s->done >= seq; });
}

/// The allocation holding `p` (mutex held), or null.
const std::pair<const std::uint8_t* const, Alloc>* find(const void* p) {
  auto& m = g().allocs;
  auto it = m.upper_bound(static_cast<const std::uint8_t*>(p));
  if (it == m.begin()) return nullptr;
  --it;
  const auto* q = static_cast<const std::uint8_t*>(p);
  return q < it->first + std::max<std::size_t>(it->second.bytes, 1) ? &*it : nullptr;
}

bool on_device(const void* p) {
  auto* a = find(p);
  return a != nullptr && (a->second.kind == Mem::device || a->second.kind == Mem::managed);
}
bool page_locked(const void* p) {
  auto* a = find(p);
  return a != nullptr && a->second.kind != Mem::device;
}

/// `extent` bytes at `p` are device memory (`device`) or host memory (!`device`), inside one allocation.
bool valid_side(const void* p, std::size_t extent, bool device) {
  if (extent == 0) return true;
  auto* a = find(p);
  if (device ? !on_device(p) : a != nullptr && a->second.kind == Mem::device) return false;
  return a == nullptr || static_cast<const std::uint8_t*>(p) + extent <= a->first + a->second.bytes;
}

/// No queued operation (other than `self`) reads or writes [p, p + n): about to be freed.
void check_unused(const std::uint8_t* p, std::size_t n, const char* how, const Work* self = nullptr) {
  for (const auto& s : g().all)
    for (const Work& w : s->queue)
      for (const Range& r : w.touches)
        if (&w != self && r.p < p + n && p < r.p + r.n)
          violation(std::string(how) + " of memory that a queued operation still uses: " + w.what);
}

/// Frees device memory: poisoned and kept aside (a late copy reads the poison, not another buffer).
void release_device(const std::uint8_t* base) {
  State& s = g();
  auto it = s.allocs.find(base);
  const std::size_t n = it->second.bytes;
  s.used[it->second.device] -= std::min(s.used[it->second.device], n);
  s.allocs.erase(it);
  auto* p = const_cast<std::uint8_t*>(base);
  std::memset(p, 0xdb, n);
  s.quarantine.emplace_back(p, n);
  s.quarantined += n;
  while (s.quarantined > (std::size_t{256} << 20) && s.quarantine.size() > 1) {
    std::free(s.quarantine.front().first);
    s.quarantined -= s.quarantine.front().second;
    s.quarantine.pop_front();
  }
}

void* aligned(std::size_t bytes, std::size_t align) {
  return std::aligned_alloc(align, (std::max<std::size_t>(bytes, 1) + align - 1) / align * align);
}

cudaError_t new_device_memory(void** p, std::size_t bytes, Mem kind, int dev) {
  State& s = g();
  if (bytes == 0) {
    *p = nullptr;
    return cudaSuccess;
  }
  if (s.used[dev] + bytes > s.cfg.memory) return fail(cudaErrorMemoryAllocation);
  *p = aligned(bytes, 256);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  s.allocs[static_cast<std::uint8_t*>(*p)] = Alloc{bytes, kind, dev};
  s.used[dev] += bytes;
  return cudaSuccess;
}

Op op_of(cudaMemcpyKind k) {
  return k == cudaMemcpyHostToDevice ? Op::h2d : k == cudaMemcpyDeviceToHost ? Op::d2h : Op::d2d;
}

/// A copy of `height` rows of `width` bytes (mutex held, `dev` current): checked, then enqueued; with
/// pageable host memory on one side it returns once the copy is done, as CUDA's does.
cudaError_t copy(std::unique_lock<std::mutex>& lk, void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                 std::size_t height, cudaMemcpyKind kind, const std::shared_ptr<CUstream_st>& s, const char* call) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault)
    kind = on_device(src) ? (on_device(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                          : (on_device(dst) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  if (height > 1 && (width > dpitch || width > spitch)) return fail(cudaErrorInvalidPitchValue);
  if (height > 1 && (dpitch > g().cfg.max_pitch || spitch > g().cfg.max_pitch)) return fail(cudaErrorInvalidPitchValue);
  const std::size_t dext = (height - 1) * dpitch + width, sext = (height - 1) * spitch + width;
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyHostToHost || !valid_side(dst, dext, dst_dev) || !valid_side(src, sext, src_dev))
    return fail(cudaErrorInvalidValue);
  const bool pageable = (!dst_dev && !page_locked(dst)) || (!src_dev && !page_locked(src));
  Work w;
  auto* d = static_cast<std::uint8_t*>(dst);
  auto* from = static_cast<const std::uint8_t*>(src);
  w.body = [=] {
    for (std::size_t r = 0; r < height; ++r) std::memcpy(d + r * dpitch, from + r * spitch, width);
  };
  w.delay_us = g().cfg.delay_us[static_cast<int>(op_of(kind))];
  w.what = std::string(call) + " " + (kind == cudaMemcpyHostToDevice ? "H2D" : kind == cudaMemcpyDeviceToHost ? "D2H" : "D2D") +
           " of " + std::to_string(width * height) + " bytes";
  w.touches = {Range{d, dext}, Range{from, sext}};
  std::uint64_t seq = 0;
  if (cudaError_t e = enqueue(s, std::move(w), &seq); e != cudaSuccess) return e;
  if (pageable && seq != 0) wait_done(lk, s, seq);
  return cudaSuccess;
}

/// The driver's cuCtxGetCurrent (CUresult (CUcontext*)): a context when the thread has a device.
int sim_cu_ctx_get_current(void** c) {
  *c = t.device >= 0 ? reinterpret_cast<void*>(static_cast<std::intptr_t>(t.device) + 1) : nullptr;
  return 0;
}

std::shared_ptr<CUevent_st> event_of(cudaEvent_t e) {
  auto it = g().events.find(e);
  return it == g().events.end() ? nullptr : it->second;
}

const ckpt::simgpu::Mutant* selected_mutant();
std::atomic<long> g_mutant_skips{0};

}  // namespace

extern "C" {

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define SIM_NAME(x) \
  case x: return #x;
    SIM_NAME(cudaSuccess)
    SIM_NAME(cudaErrorInvalidValue)
    SIM_NAME(cudaErrorMemoryAllocation)
    SIM_NAME(cudaErrorInitializationError)
    SIM_NAME(cudaErrorInvalidPitchValue)
    SIM_NAME(cudaErrorStubLibrary)
    SIM_NAME(cudaErrorInsufficientDriver)
    SIM_NAME(cudaErrorCallRequiresNewerDriver)
    SIM_NAME(cudaErrorDevicesUnavailable)
    SIM_NAME(cudaErrorNoDevice)
    SIM_NAME(cudaErrorInvalidDevice)
    SIM_NAME(cudaErrorECCUncorrectable)
    SIM_NAME(cudaErrorContained)
    SIM_NAME(cudaErrorInvalidResourceHandle)
    SIM_NAME(cudaErrorIllegalState)
    SIM_NAME(cudaErrorNotReady)
    SIM_NAME(cudaErrorIllegalAddress)
    SIM_NAME(cudaErrorLaunchTimeout)
    SIM_NAME(cudaErrorAssert)
    SIM_NAME(cudaErrorHostMemoryAlreadyRegistered)
    SIM_NAME(cudaErrorHostMemoryNotRegistered)
    SIM_NAME(cudaErrorHardwareStackError)
    SIM_NAME(cudaErrorIllegalInstruction)
    SIM_NAME(cudaErrorMisalignedAddress)
    SIM_NAME(cudaErrorInvalidAddressSpace)
    SIM_NAME(cudaErrorInvalidPc)
    SIM_NAME(cudaErrorLaunchFailure)
    SIM_NAME(cudaErrorTensorMemoryLeak)
    SIM_NAME(cudaErrorNotSupported)
    SIM_NAME(cudaErrorMpsClientTerminated)
    SIM_NAME(cudaErrorStreamCaptureUnsupported)
    SIM_NAME(cudaErrorStreamCaptureInvalidated)
    SIM_NAME(cudaErrorStreamCaptureIsolation)
    SIM_NAME(cudaErrorStreamCaptureImplicit)
    SIM_NAME(cudaErrorExternalDevice)
    SIM_NAME(cudaErrorUnknown)
#undef SIM_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "error of the simulated device (see its name)";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t.last;
  t.last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return t.last; }

cudaError_t cudaGetDeviceCount(int* count) {
  SIM_CALL();
  *count = g().cfg.devices;
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {  // no context: CUDA answers 0 on a thread that chose none
  SIM_CALL();
  if (g().cfg.devices == 0) return fail(cudaErrorNoDevice);
  *device = t.device < 0 ? 0 : t.device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {  // CUDA 12+: makes the device's primary context current now
  SIM_CALL();
  if (device < 0 || device >= g().cfg.devices) return fail(cudaErrorInvalidDevice);
  t.device = device;
  attach(device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  SIM_CALL();
  if (device < 0 || device >= g().cfg.devices) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxPitch: *value = static_cast<int>(std::min<std::size_t>(g().cfg.max_pitch, 0x7fffffff)); break;
    case cudaDevAttrMemoryPoolsSupported: *value = g().cfg.pools ? 1 : 0; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  SIM_CALL();
  if (device < 0 || device >= g().cfg.devices) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "ckpt simulated device %d", device);
  prop->totalGlobalMem = g().cfg.memory;
  prop->memPitch = g().cfg.max_pitch;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  SIM_CALL_CTX();
  *total_bytes = g().cfg.memory;
  *free_bytes = g().cfg.memory - std::min(g().cfg.memory, g().used[dev]);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  SIM_CALL_CTX();
  std::vector<Dep> all;
  for (const auto& s : g().all)
    if (s->device == dev) all.push_back(Dep{s, s->enqueued});
  for (const Dep& d : all) wait_done(lk, d.stream, d.seq);
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  SIM_CALL();
  const bool known = std::strcmp(symbol, "cuCtxGetCurrent") == 0;
  *fn = known ? reinterpret_cast<void*>(&sim_cu_ctx_get_current) : nullptr;
  if (status != nullptr) *status = known ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

// ---- streams -----------------------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  SIM_CALL_CTX();
  auto p = make_stream(dev, (flags & cudaStreamNonBlocking) == 0, false);
  g().handles[p.get()] = p;
  *s = p.get();
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t h) {
  SIM_CALL_CTX();
  if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread) return fail(cudaErrorInvalidResourceHandle);
  SIM_STREAM(s, h);
  g().handles.erase(s.get());
  retire(s);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  wait_done(lk, s, s->enqueued);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  return s->done >= s->enqueued ? cudaSuccess : cudaErrorNotReady;  // not an error: the last error stays
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  auto ev = event_of(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  if (ev->captured) return s->capturing ? cudaSuccess : fail(cudaErrorStreamCaptureIsolation);
  if (!ev->stream) return cudaSuccess;  // never recorded: nothing to wait for
  Work w;
  w.deps.push_back(Dep{ev->stream, ev->seq});  // the generation current now, whatever is recorded later
  w.what = "cudaStreamWaitEvent";
  return enqueue(s, std::move(w));
}

cudaError_t cudaStreamGetDevice(cudaStream_t h, int* device) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  if (s->capturing) {
    // Assumed, not verified on a GPU: a query other than cudaStreamIsCapturing on a stream being
    // captured is refused and spoils the capture (what CUDA does with calls it deems unsafe then).
    s->capture_invalid = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  *device = s->device;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t h, cudaStreamCaptureStatus* status) {
  SIM_CALL_CTX();
  if (h == nullptr || h == cudaStreamLegacy) {
    if (CUstream_st* c = strict_capture_on(dev)) {
      c->capture_invalid = true;
      return fail(cudaErrorStreamCaptureImplicit);
    }
  }
  SIM_STREAM(s, h);
  *status = !s->capturing        ? cudaStreamCaptureStatusNone
            : s->capture_invalid ? cudaStreamCaptureStatusInvalidated
                                 : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t h, cudaStreamCaptureMode mode) {
  SIM_CALL_CTX();
  if (h == nullptr || h == cudaStreamLegacy) return fail(cudaErrorStreamCaptureUnsupported);
  SIM_STREAM(s, h);
  if (s->capturing) return fail(cudaErrorIllegalState);
  s->capturing = true;
  s->capture_invalid = false;
  s->capture_mode = mode;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t* graph) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  if (!s->capturing) return fail(cudaErrorIllegalState);
  s->capturing = false;
  *graph = nullptr;
  if (s->capture_invalid) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  SIM_CALL();
  delete graph;
  return cudaSuccess;
}

// ---- events ------------------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  SIM_CALL_CTX();
  auto ev = std::make_shared<CUevent_st>();
  ev->timing = (flags & cudaEventDisableTiming) == 0;
  g().events[ev.get()] = ev;
  *e = ev.get();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {  // a record still queued keeps the event alive
  SIM_CALL_CTX();
  if (g().events.erase(e) == 0) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  auto ev = event_of(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  const std::uint64_t gen = ++ev->gen;
  if (s->capturing) {
    ev->captured = true;
    ev->stream = nullptr;
    return cudaSuccess;
  }
  Work w;
  w.body = [ev, gen] {
    std::lock_guard<std::mutex> l(g().mu);
    if (ev->gen == gen) ev->done_ns = now();
  };
  w.what = "cudaEventRecord";
  std::uint64_t seq = 0;
  if (cudaError_t err = enqueue(s, std::move(w), &seq); err != cudaSuccess) return err;
  ev->captured = false;
  ev->stream = s;
  ev->seq = seq;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  SIM_CALL_CTX();
  auto ev = event_of(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  if (ev->captured) return fail(cudaErrorStreamCaptureUnsupported);
  if (ev->stream) wait_done(lk, ev->stream, ev->seq);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  SIM_CALL_CTX();
  auto ev = event_of(e);
  if (!ev) return fail(cudaErrorInvalidResourceHandle);
  return !ev->stream || ev->stream->done >= ev->seq ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  SIM_CALL_CTX();
  auto a = event_of(start), b = event_of(end);
  if (!a || !b || !a->timing || !b->timing || !a->stream || !b->stream) return fail(cudaErrorInvalidResourceHandle);
  if (a->stream->done < a->seq || b->stream->done < b->seq) return cudaErrorNotReady;
  *ms = static_cast<float>(static_cast<double>(b->done_ns - a->done_ns) / 1e6);
  return cudaSuccess;
}

// ---- memory ------------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  SIM_CALL_CTX();
  return new_device_memory(p, bytes, Mem::device, dev);
}

cudaError_t cudaMallocManaged(void** p, std::size_t bytes, unsigned) {
  SIM_CALL_CTX();
  return new_device_memory(p, bytes, Mem::managed, dev);
}

cudaError_t cudaFree(void* p) {
  SIM_CALL_CTX();
  if (p == nullptr) return cudaSuccess;
  auto it = g().allocs.find(static_cast<const std::uint8_t*>(p));
  if (it == g().allocs.end() || (it->second.kind != Mem::device && it->second.kind != Mem::managed))
    return fail(cudaErrorInvalidValue);
  // cudaFree synchronises the device first.
  std::vector<Dep> all;
  for (const auto& s : g().all)
    if (s->device == it->second.device) all.push_back(Dep{s, s->enqueued});
  for (const Dep& d : all) wait_done(lk, d.stream, d.seq);
  it = g().allocs.find(static_cast<const std::uint8_t*>(p));
  check_unused(it->first, it->second.bytes, "cudaFree");
  release_device(it->first);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t h) {
  SIM_CALL_CTX();
  if (!g().cfg.pools) return fail(cudaErrorNotSupported);
  SIM_STREAM(s, h);
  return new_device_memory(p, bytes, Mem::device, s->device);  // usable at once: ordered trivially
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  if (p == nullptr) return cudaSuccess;
  auto* base = static_cast<const std::uint8_t*>(p);
  if (g().allocs.count(base) == 0 || g().allocs[base].kind != Mem::device) return fail(cudaErrorInvalidValue);
  auto self = std::make_shared<const Work*>(nullptr);
  Work w;
  w.body = [base, self] {  // in stream order: no copy on another stream may still use it
    std::lock_guard<std::mutex> l(g().mu);
    check_unused(base, g().allocs[base].bytes, "cudaFreeAsync", *self);
    release_device(base);
  };
  w.what = "cudaFreeAsync";
  if (cudaError_t e = enqueue(s, std::move(w)); e != cudaSuccess) return e;
  if (!s->capturing) *self = &s->queue.back();
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned) {
  SIM_CALL_CTX();
  *p = aligned(bytes, 4096);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  g().allocs[static_cast<std::uint8_t*>(*p)] = Alloc{bytes, Mem::pinned, dev};
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, std::size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void* p) {
  SIM_CALL_CTX();
  if (p == nullptr) return cudaSuccess;
  auto it = g().allocs.find(static_cast<const std::uint8_t*>(p));
  if (it == g().allocs.end() || it->second.kind != Mem::pinned) return fail(cudaErrorInvalidValue);
  check_unused(it->first, it->second.bytes, "cudaFreeHost");
  g().allocs.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* p, std::size_t bytes, unsigned) {
  SIM_CALL_CTX();
  auto* q = static_cast<const std::uint8_t*>(p);
  auto it = g().allocs.lower_bound(q + bytes);
  if (find(p) != nullptr || (it != g().allocs.begin() && std::prev(it)->first >= q))
    return fail(cudaErrorHostMemoryAlreadyRegistered);
  g().allocs[q] = Alloc{bytes, Mem::registered, dev};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* p) {
  SIM_CALL_CTX();
  auto it = g().allocs.find(static_cast<const std::uint8_t*>(p));
  if (it == g().allocs.end() || it->second.kind != Mem::registered) return fail(cudaErrorHostMemoryNotRegistered);
  check_unused(it->first, it->second.bytes, "cudaHostUnregister");
  g().allocs.erase(it);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  SIM_CALL();
  *a = cudaPointerAttributes{cudaMemoryTypeUnregistered, -2, nullptr, nullptr};
  if (auto* f = find(p)) {
    const Mem k = f->second.kind;
    a->type = k == Mem::device ? cudaMemoryTypeDevice : k == Mem::managed ? cudaMemoryTypeManaged : cudaMemoryTypeHost;
    a->device = f->second.device;
    a->devicePointer = const_cast<void*>(p);
    a->hostPointer = k == Mem::device ? nullptr : const_cast<void*>(p);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind, cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  return copy(lk, dst, n, src, n, n, 1, kind, s, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                              std::size_t height, cudaMemcpyKind kind, cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  return copy(lk, dst, dpitch, src, spitch, width, height, kind, s, "cudaMemcpy2DAsync");
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  SIM_CALL_CTX();
  auto s = resolve(nullptr, dev);  // the legacy stream, then wait for it
  if (cudaError_t e = copy(lk, dst, n, src, n, n, 1, kind, s, "cudaMemcpy"); e != cudaSuccess) return e;
  wait_done(lk, s, s->enqueued);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t h) {
  SIM_CALL_CTX();
  SIM_STREAM(s, h);
  if (n == 0) return cudaSuccess;
  if (!valid_side(p, n, true)) return fail(cudaErrorInvalidValue);
  auto* d = static_cast<std::uint8_t*>(p);
  Work w;
  w.body = [d, value, n] { std::memset(d, value, n); };
  w.delay_us = g().cfg.delay_us[static_cast<int>(Op::kernel)];  // a kernel on the GPU
  w.what = "cudaMemsetAsync of " + std::to_string(n) + " bytes";
  w.touches = {Range{d, n}};
  return enqueue(s, std::move(w));
}

cudaError_t cudaMemset(void* p, int value, std::size_t n) {
  if (cudaError_t e = cudaMemsetAsync(p, value, n, nullptr); e != cudaSuccess) return e;
  return cudaStreamSynchronize(nullptr);
}

}  // extern "C"

// ---- controls -----------------------------------------------------------------------------------------

namespace ckpt::simgpu {

void set_delay_us(Op op, long us) {
  std::lock_guard<std::mutex> lk(g().mu);
  g().cfg.delay_us[static_cast<int>(op)] = us;
}

void inject_error(const std::string& call, int after, cudaError_t error) {
  std::lock_guard<std::mutex> lk(g().mu);
  g().injected[call].emplace_back(after, error);
}

void set_device_count(int n) {
  std::lock_guard<std::mutex> lk(g().mu);
  g().cfg.devices = std::clamp(n, 0, kMaxDevices);
}

void set_max_pitch(std::size_t bytes) {
  std::lock_guard<std::mutex> lk(g().mu);
  g().cfg.max_pitch = bytes;
}

void set_memory_pools_supported(bool yes) {
  std::lock_guard<std::mutex> lk(g().mu);
  g().cfg.pools = yes;
}

void set_device_memory(std::size_t bytes) {
  std::lock_guard<std::mutex> lk(g().mu);
  g().cfg.memory = bytes;
}

void reset() {
  std::lock_guard<std::mutex> lk(g().mu);
  g().cfg = Config{};
  g().injected.clear();
}

int device_attachments(int device) {
  std::lock_guard<std::mutex> lk(g().mu);
  return device >= 0 && device < kMaxDevices ? g().attachments[device] : 0;
}

bool thread_has_device() { return t.device >= 0; }

long calls(const std::string& call) {
  std::lock_guard<std::mutex> lk(g().mu);
  auto it = g().calls.find(call);
  return it == g().calls.end() ? 0 : it->second;
}

cudaError_t launch(cudaStream_t h, std::function<void()> fn) {
  std::unique_lock<std::mutex> lk(g().mu);
  if (cudaError_t e = enter("cudaLaunchKernel"); e != cudaSuccess) return fail(e);
  const int dev = ctx();
  if (dev < 0) return fail(cudaErrorNoDevice);
  SIM_STREAM(s, h);
  Work w;
  w.body = std::move(fn);
  w.delay_us = g().cfg.delay_us[static_cast<int>(Op::kernel)];
  w.what = "kernel";
  return enqueue(s, std::move(w));
}

long long now_ns() { return now(); }

const std::vector<Mutant>& mutants() {
  // Every wait of gpu/cuda_device.cu: the stream-ordering waits between its streams and the
  // application's, and the host's waits. A mutant removes one (all its sites: app_waits_captured has
  // one in each double-buffering mode, teardown_waits_copy two in the destructor).
  static const std::vector<Mutant> m = {
      {"copy_waits_start", "CudaDevice::start_device_copies(", "cudaStreamWaitEvent(m_copy, m_start, 0)"},
      {"d2d_waits_start", "CudaDevice::start_device_copies(", "cudaStreamWaitEvent(m_d2d, m_start, 0)"},
      {"copy_waits_d2d", "CudaDevice::join_d2d(", "cudaStreamWaitEvent(m_copy, m_d2d_done, 0)"},
      {"d2d_waits_spare_free", "CudaDevice::copy_to_host(", "cudaStreamWaitEvent(m_d2d, m_spare_free, 0)"},
      {"app_waits_captured", "CudaDevice::capture_end(", "cudaStreamWaitEvent(app, m_captured, 0)"},
      {"copy_waits_restore_after", "CudaDevice::restore_begin(", "cudaStreamWaitEvent(m_copy, m_restore_after, 0)"},
      {"host_waits_fence", "CudaDevice::wait(", "cudaEventSynchronize(e)"},
      {"restore_end_waits_copy", "CudaDevice::restore_end(", "cudaStreamSynchronize(m_copy)"},
      {"free_staging_waits_d2d", "CudaDevice::free_staging(", "cudaStreamSynchronize(m_d2d)"},
      {"free_staging_waits_copy", "CudaDevice::free_staging(", "cudaStreamSynchronize(m_copy)"},
      {"drain_waits_d2d", "CudaDevice::synchronize(", "cudaStreamSynchronize(m_d2d)"},
      {"drain_waits_copy", "CudaDevice::synchronize(", "cudaStreamSynchronize(m_copy)"},
      {"teardown_waits_d2d", "CudaDevice::~CudaDevice(", "cudaStreamSynchronize(m_d2d)"},
      {"teardown_waits_copy", "CudaDevice::~CudaDevice(", "cudaStreamSynchronize(m_copy)"},
  };
  return m;
}

bool mutant_skips(const char* function, const char* call_text) {
  const Mutant* m = selected_mutant();
  if (m == nullptr || std::strstr(function, m->function) == nullptr || std::strcmp(call_text, m->call) != 0)
    return false;
  if (g_mutant_skips++ == 0)  // said at once: a test that aborts never reaches the count said at exit
    std::fprintf(stderr, "simgpu: mutant %s removed its first wait\n", m->name);
  return true;
}

}  // namespace ckpt::simgpu

namespace {

const ckpt::simgpu::Mutant* selected_mutant() {
  static const ckpt::simgpu::Mutant* m = [] () -> const ckpt::simgpu::Mutant* {
    const char* name = std::getenv("SIMGPU_MUTANT");
    if (name == nullptr || *name == '\0') return nullptr;
    for (const auto& x : ckpt::simgpu::mutants())
      if (std::strcmp(x.name, name) == 0) {
        std::atexit([] {
          std::fprintf(stderr, "simgpu: mutant %s removed %ld waits\n", selected_mutant()->name, g_mutant_skips.load());
        });
        return &x;
      }
    std::fprintf(stderr, "simgpu: SIMGPU_MUTANT=%s names no mutant\n", name);
    std::abort();
  }();
  return m;
}

}  // namespace
