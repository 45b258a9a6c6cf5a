// MPI-IO helpers shared by the transports that write with MPI-IO (internal); the generic MPI
// helpers are in base/mpi.hpp.
#ifndef CKPT_TRANSPORTS_MPI_UTIL_HPP
#define CKPT_TRANSPORTS_MPI_UTIL_HPP

#include <mpi.h>

#include <string>

#include "base/layout.hpp"
#include "base/mpi.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Status of an MPI-IO write of `want` bytes: the error code, and also the count in `st` - Open MPI's
/// OMPIO returns MPI_SUCCESS from a (collective) write whose pwritev failed (ENOSPC, EIO) and only
/// reports fewer bytes written, so a write is successful only if all its bytes were written.
inline Status mpi_write_status(int rc, const MPI_Status& st, int want, const std::string& what) {
  if (rc != MPI_SUCCESS) return mpi_status(rc, what);
  int got = 0;
  MPI_Get_count(&st, MPI_BYTE, &got);
  if (got == want) return Status::OK();
  return Status(Code::io_error, what + ": wrote " + std::to_string(got) + " of " + std::to_string(want) +
                                    " bytes (the MPI-IO layer reported no error; disk full or I/O error?)");
}

/// An MPI_Info of `hints` (TransportConfig::mpiio_hints: validated, byte counts in bytes);
/// MPI_INFO_NULL when there are none. The caller frees it.
inline MPI_Info make_info(const Attributes& hints) {
  MPI_Info info = MPI_INFO_NULL;
  if (hints.empty()) return info;
  MPI_Info_create(&info);
  for (auto& [key, value] : hints) MPI_Info_set(info, key.c_str(), value.c_str());
  return info;
}

/// The hints an open file actually has (what ROMIO/OMPIO chose), for the index.
inline Attributes hints_in_effect(MPI_File fh, const char* prefix) {
  Attributes out;
  MPI_Info info = MPI_INFO_NULL;
  if (MPI_File_get_info(fh, &info) != MPI_SUCCESS || info == MPI_INFO_NULL) return out;
  int n = 0;
  MPI_Info_get_nkeys(info, &n);
  for (int i = 0; i < n; ++i) {
    char key[MPI_MAX_INFO_KEY + 1] = {};
    MPI_Info_get_nthkey(info, i, key);
    int len = 0, flag = 0;
    MPI_Info_get_valuelen(info, key, &len, &flag);
    if (!flag) continue;
    std::string value(static_cast<std::size_t>(len) + 1, '\0');
    MPI_Info_get(info, key, len + 1, value.data(), &flag);
    value.resize(static_cast<std::size_t>(len));
    out.emplace_back(std::string(prefix) + key, value);
  }
  MPI_Info_free(&info);
  return out;
}

inline std::uint64_t round_up_to(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace ckpt::detail

#endif  // CKPT_TRANSPORTS_MPI_UTIL_HPP
