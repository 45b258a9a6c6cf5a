// The one table of transports. A known name that this build cannot make stays in the table and says
// why, instead of answering "unknown" (see docs/adding-a-transport.md).
#include <functional>

#include "ckpt/config.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

Result<std::unique_ptr<Transport>> make_posix_transport(const TransportConfig& c, const TransportEnv& env);
Result<std::unique_ptr<Transport>> make_null_transport(const TransportConfig& c, const TransportEnv& env);
Result<std::unique_ptr<Transport>> make_mpiio_transport(const TransportConfig& c, const TransportEnv& env);
Result<std::unique_ptr<Transport>> make_rbio_transport(const TransportConfig& c, const TransportEnv& env);
#if CKPT_HAVE_HDF5
Result<std::unique_ptr<Transport>> make_hdf5_transport(const TransportConfig& c, const TransportEnv& env);
Result<std::unique_ptr<Transport>> make_hdf5_sync_transport(const TransportConfig& c, const TransportEnv& env);
#endif

namespace {

struct Entry {
  const char* name;
  const char* description;
  std::function<Result<std::unique_ptr<Transport>>(const TransportConfig&, const TransportEnv&)>
      make;  // empty: not available
  const char* why_not;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
    {"posix", "one file per rank (1PFPP), pwrite + fdatasync", make_posix_transport, ""},
    {"null", "throws data away: the NO-I/O baseline", make_null_transport, ""},
    {"mpiio", "coIO: MPI-IO collective writes into nf files", make_mpiio_transport, ""},
    {"rbio", "rbIO: workers send to writer ranks, writers write", make_rbio_transport, ""},
#if CKPT_HAVE_HDF5
    {"hdf5", "parallel HDF5, one dataset per variable, written by the flush thread", make_hdf5_transport, ""},
    {"hdf5-sync", "parallel HDF5 written collectively from the application thread (baseline)", make_hdf5_sync_transport,
     ""},
#else
    {"hdf5", "parallel HDF5", nullptr, "not available: ckpt was built without HDF5"},
    {"hdf5-sync", "parallel HDF5 (sync)", nullptr, "not available: ckpt was built without HDF5"},
#endif
  };
  return t;
}

}  // namespace

Result<std::unique_ptr<Transport>> make_transport(const std::string& name, const TransportConfig& config,
                                                  const TransportEnv& env) {
  std::string known;
  for (auto& e : table()) {
    if (name == e.name) {
      if (!e.make) return Status(Code::unavailable, "transport '" + name + "' is " + e.why_not);
      return e.make(config, env);
    }
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  return Status(Code::invalid_argument, "unknown transport '" + name + "' (known: " + known + ")");
}

}  // namespace ckpt::detail
