// The typed settings the runtime hands its components, made from Options in runtime/src/options.cpp
// (the one place options are read), so that a transport or a device never sees all of Options.
#ifndef CKPT_RUNTIME_SRC_CONFIG_HPP
#define CKPT_RUNTIME_SRC_CONFIG_HPP

#include <string>

#include "base/layout.hpp"
#include "ckpt/options.hpp"
#include "gpu/device.hpp"
#include "runtime/src/threads.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

/// Largest chunk the auto chunk size picks (chunk_bytes = 0; see auto_chunk_bytes in pool.hpp), and
/// the piece the transports and the drain read and write in when chunk_bytes is auto.
constexpr std::uint64_t kMaxAutoChunk = std::uint64_t{16} << 20;
/// The piece size of transports and the drain: chunk_bytes, or kMaxAutoChunk when it is auto.
inline std::uint64_t io_piece_bytes(const Options& o) { return o.chunk_bytes != 0 ? o.chunk_bytes : kMaxAutoChunk; }

/// Checks "key=value,..." MPI-IO hints and returns them as pairs, byte counts in bytes
/// (invalid_argument naming the option otherwise). Options' validation and transport_config() use it.
Result<Attributes> parse_mpiio_hints(const std::string& text);
/// The transports' settings from validated options.
TransportConfig transport_config(const Options& o);
/// Checks a CPU list ("0-3,8,10-11") and returns the CPUs (invalid_argument naming `key` otherwise).
Result<std::vector<int>> parse_cpu_list(const std::string& key, const std::string& text);
/// The background threads' policy from validated options (threads.hpp).
ThreadPolicy thread_policy(const Options& o);
/// The device's settings from validated options.
CudaDeviceConfig device_config(const Options& o);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_SRC_CONFIG_HPP
