// libnvtx_record.so: an NVTX v3 injection library that records ranges, for checking ckpt's NVTX ranges
// without Nsight (and without a GPU). NVTX loads it when NVTX_INJECTION64_PATH names it: the first NVTX
// call of each module (libckpt, the application) runs InitializeInjectionNvtx2 with NVTX's export
// table, through which this library puts its own functions into NVTX's function table (the mechanism
// Nsight Systems uses; see nvtx3/nvtxDetail/nvtxInit.h and nvtxTypes.h).
//
// It records, in every domain: push/pop ranges (per thread and domain stack: depth and parent),
// start/end ranges (with the thread of each end), OS thread names, with CLOCK_MONOTONIC timestamps
// (std::chrono::steady_clock, the clock of ckpt's CKPT_TRACE). Misuse is recorded too: a pop on an
// empty stack, an end of an unknown id, ranges still open when the file is written.
//
// Output: $NVTXREC_DIR/nvtx.<rank>.tsv (rank from the MPI launcher's environment, else p<pid>), written
// at exit and whenever nvtxrec_write() is called (a test can dlopen this library with RTLD_NOLOAD and
// call it). Lines, tab-separated:
//   # nvtxrec 1 pid=<pid> rank=<rank> clock=CLOCK_MONOTONIC unit=ns
//   thread <tid> <name>
//   range  <domain> <name> <step|-1> <tid> <end_tid> <start_ns> <end_ns> <depth> <parent|-> push|startend
//   open   <domain> <name> <step|-1> <tid> <start_ns>
//   error  <text>
// tools/ckpt_report.py (--nvtx) reads these files.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Domain {
  std::string name;
};
struct RegisteredString {
  std::string text;
};

struct Range {
  std::string domain, name, parent;
  std::int64_t step = -1;
  std::uint32_t tid = 0, end_tid = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  int depth = 0;
  bool push = true;
};

struct Recorder {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Domain>> domains;
  std::map<std::pair<const Domain*, std::string>, std::unique_ptr<RegisteredString>> strings;
  std::map<std::pair<std::uint32_t, const Domain*>, std::vector<Range>> stacks;  // open pushes
  std::map<std::uint64_t, Range> started;                                        // open start/end ranges
  std::uint64_t next_id = 1;
  std::vector<Range> done;
  std::vector<std::pair<std::uint32_t, std::string>> threads;
  std::vector<std::string> errors;
  Domain default_domain{"(default)"};
};

Recorder& rec() {
  static Recorder* r = new Recorder;  // never destroyed: NVTX calls may come during exit
  return *r;
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::uint32_t tid() { return static_cast<std::uint32_t>(::syscall(SYS_gettid)); }

const Domain* dom(nvtxDomainHandle_t d) {
  return d != nullptr ? reinterpret_cast<const Domain*>(d) : &rec().default_domain;
}

std::string message(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return "";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii != nullptr ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered != nullptr ? reinterpret_cast<const RegisteredString*>(a->message.registered)->text
                                              : "(null registered string)";
    case NVTX_MESSAGE_TYPE_UNICODE: return "(unicode)";
    default: return "";
  }
}

std::int64_t step_of(const nvtxEventAttributes_t* a) {
  return a != nullptr && a->payloadType == NVTX_PAYLOAD_TYPE_INT64 ? a->payload.llValue : -1;
}

// ---- the functions put into NVTX's table ----

nvtxDomainHandle_t domain_create(const char* name) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  auto& d = r.domains[name != nullptr ? name : ""];
  if (!d) d = std::make_unique<Domain>(Domain{name != nullptr ? name : ""});
  return reinterpret_cast<nvtxDomainHandle_t>(d.get());
}

void domain_destroy(nvtxDomainHandle_t) {}  // handles stay valid: records refer to them by name

nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char* s) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  auto& p = r.strings[{dom(d), s != nullptr ? s : ""}];
  if (!p) p = std::make_unique<RegisteredString>(RegisteredString{s != nullptr ? s : ""});
  return reinterpret_cast<nvtxStringHandle_t>(p.get());
}

/// A range as it opens: now, on this thread (the timestamp first, before any lock).
Range opened(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a, bool push) {
  Range x;
  x.start_ns = now_ns();
  x.tid = tid();
  x.name = message(a);
  x.step = step_of(a);
  x.push = push;
  x.parent = "-";
  x.domain = dom(d)->name;  // set once at creation: no lock needed
  return x;
}

/// Records `x` as closed at `t` on thread `me`. Called with the lock held.
void closed(Recorder& r, Range x, std::int64_t t, std::uint32_t me) {
  x.end_ns = t;
  x.end_tid = me;
  r.done.push_back(std::move(x));
}

int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Range x = opened(d, a, true);
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  auto& st = r.stacks[{x.tid, dom(d)}];
  x.depth = static_cast<int>(st.size());
  if (!st.empty()) x.parent = st.back().name;
  st.push_back(std::move(x));
  return static_cast<int>(st.size()) - 1;
}

int pop(nvtxDomainHandle_t d) {
  const std::int64_t t = now_ns();
  const std::uint32_t me = tid();
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  auto& st = r.stacks[{me, dom(d)}];
  if (st.empty()) {
    r.errors.push_back("pop on an empty stack: thread " + std::to_string(me) + ", domain " + dom(d)->name);
    return -2;
  }
  closed(r, std::move(st.back()), t, me);
  st.pop_back();
  return static_cast<int>(st.size());
}

nvtxRangeId_t start(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Range x = opened(d, a, false);
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  const std::uint64_t id = r.next_id++;
  r.started.emplace(id, std::move(x));
  return id;
}

void end(nvtxDomainHandle_t, nvtxRangeId_t id) {
  const std::int64_t t = now_ns();
  const std::uint32_t me = tid();
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.started.find(id);
  if (it == r.started.end()) {
    r.errors.push_back("end of an unknown range id " + std::to_string(id) + " on thread " + std::to_string(me));
    return;
  }
  closed(r, std::move(it->second), t, me);
  r.started.erase(it);
}

void name_os_thread(std::uint32_t id, const char* name) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  r.threads.emplace_back(id, name != nullptr ? name : "");
}

std::string rank_name() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* s = std::getenv(v)) return s;
  return "p" + std::to_string(::getpid());
}

int write_file() {
  const char* dir = std::getenv("NVTXREC_DIR");
  const std::string path = std::string(dir != nullptr ? dir : ".") + "/nvtx." + rank_name() + ".tsv";
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return -1;
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  std::fprintf(f, "# nvtxrec 1 pid=%d rank=%s clock=CLOCK_MONOTONIC unit=ns\n", static_cast<int>(::getpid()),
               rank_name().c_str());
  for (const auto& t : r.threads) std::fprintf(f, "thread\t%u\t%s\n", t.first, t.second.c_str());
  for (const Range& x : r.done)
    std::fprintf(f, "range\t%s\t%s\t%lld\t%u\t%u\t%lld\t%lld\t%d\t%s\t%s\n", x.domain.c_str(), x.name.c_str(),
                 static_cast<long long>(x.step), x.tid, x.end_tid, static_cast<long long>(x.start_ns),
                 static_cast<long long>(x.end_ns), x.depth, x.parent.c_str(), x.push ? "push" : "startend");
  auto open = [&](const Range& x) {
    std::fprintf(f, "open\t%s\t%s\t%lld\t%u\t%lld\n", x.domain.c_str(), x.name.c_str(), static_cast<long long>(x.step),
                 x.tid, static_cast<long long>(x.start_ns));
  };
  for (const auto& st : r.stacks)
    for (const Range& x : st.second) open(x);
  for (const auto& s : r.started) open(s.second);
  for (const auto& e : r.errors) std::fprintf(f, "error\t%s\n", e.c_str());
  const bool ok = std::fflush(f) == 0;
  if (std::fclose(f) != 0 || !ok) return -1;
  return std::rename(tmp.c_str(), path.c_str()) == 0 ? 0 : -1;
}

template <class F>
void install(NvtxFunctionTable table, unsigned size, unsigned id, F* fn) {
  if (table != nullptr && id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

/// Writes this process's file now (also done at exit). 0 on success.
extern "C" NVTX_DYNAMIC_EXPORT int nvtxrec_write() { return write_file(); }

/// NVTX's entry point, called once per module that uses NVTX. Returns 1 (success).
extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  NvtxFunctionTable core2 = nullptr, core = nullptr;
  unsigned n2 = 0, n1 = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n2) == 0 || core2 == nullptr) return 0;
  install(core2, n2, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  install(core2, n2, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
  install(core2, n2, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  install(core2, n2, NVTX_CBID_CORE2_DomainRangePushEx, &push);
  install(core2, n2, NVTX_CBID_CORE2_DomainRangePop, &pop);
  install(core2, n2, NVTX_CBID_CORE2_DomainRangeStartEx, &start);
  install(core2, n2, NVTX_CBID_CORE2_DomainRangeEnd, &end);
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n1) != 0)
    install(core, n1, NVTX_CBID_CORE_NameOsThreadA, &name_os_thread);
  static std::once_flag once;
  std::call_once(once, [] { std::atexit([] { (void)write_file(); }); });
  return 1;
}
