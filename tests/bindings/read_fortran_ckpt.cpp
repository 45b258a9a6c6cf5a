// A C++ program that restarts from a checkpoint written by the Fortran example heat3d (and writes one
// heat3d restarts from): the Fortran field u(nx, ny, nz) is the C-order global array [nz][ny][nx].
// This program decomposes it differently (slabs of the slowest C dimension), restarts step S through
// the C++ API, gathers the field on rank 0 and compares it byte for byte with the raw file heat3d
// wrote at that step (--expect). With --write DIR it checkpoints what it read, from C++, into DIR.
//
//   read_fortran_ckpt --dir D --step S --n NX NY NZ --expect FILE [--write DIR]
// Prints "cxx: ok ..." and exits 0 when the data matches.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ckpt/ckpt.h"  // compiled as C++ as well: the ckpt_create template below
#include "ckpt/ckpt.hpp"

namespace {

// ckpt.h's C++ form of ckpt_create instantiates for MPI_Comm.
[[maybe_unused]] int (*const c_create)(MPI_Comm, const char*, ckpt_runtime**) = &ckpt_create<MPI_Comm>;

struct Args {
  std::string dir, expect, write;
  std::int64_t step = -1;
  std::uint64_t n[3] = {0, 0, 0};  // Fortran order: nx, ny, nz
};

int fail(int rank, const std::string& why) {
  std::fprintf(stderr, "read_fortran_ckpt: rank %d: %s\n", rank, why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--dir" && i + 1 < argc) {
      a.dir = argv[++i];
    } else if (k == "--step" && i + 1 < argc) {
      a.step = std::atoll(argv[++i]);
    } else if (k == "--expect" && i + 1 < argc) {
      a.expect = argv[++i];
    } else if (k == "--write" && i + 1 < argc) {
      a.write = argv[++i];
    } else if (k == "--n" && i + 3 < argc) {
      for (auto& v : a.n) v = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: read_fortran_ckpt --dir D --step S --n NX NY NZ --expect FILE [--write DIR]\n");
      MPI_Finalize();
      return 2;
    }
  }
  int rc = 0;
  {
    // C order: [nz][ny][nx]; this rank holds the z slab [z0, z0 + lz).
    const std::uint64_t nx = a.n[0], ny = a.n[1], nz = a.n[2];
    const std::uint64_t base = nz / size, extra = nz % size, r = static_cast<std::uint64_t>(rank);
    const std::uint64_t lz = base + (r < extra ? 1 : 0), z0 = r * base + std::min(r, extra);
    const ckpt::Block box{{nz, ny, nx}, {z0, 0, 0}, {lz, ny, nx}};
    std::vector<double> u(lz * ny * nx, -1.0);
    std::int64_t step = -1;

    ckpt::Options o = ckpt::Options::defaults();
    o.dir = a.dir;
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    ckpt::Status s = rt.protect("u", u.data(), ckpt::DType::f64, box);
    if (s.ok()) s = rt.protect_scalar("step", &step);
    if (s.ok()) s = rt.restart(a.step);
    if (!s.ok()) rc = fail(rank, "restart from the Fortran checkpoint: " + s.to_string());
    if (rc == 0 && step != a.step) rc = fail(rank, "restored step " + std::to_string(step));

    // Slabs are contiguous in C order: a plain gather in rank order is the global array.
    std::vector<int> counts(size), displs(size);
    const int mine = static_cast<int>(u.size());
    MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int p = 1; p < size; ++p) displs[p] = displs[p - 1] + counts[p - 1];
    std::vector<double> global(rank == 0 ? nx * ny * nz : 0);
    MPI_Gatherv(u.data(), mine, MPI_DOUBLE, global.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0 && rc == 0) {
      std::ifstream f(a.expect, std::ios::binary);
      std::vector<char> want((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (want.size() != global.size() * sizeof(double))
        rc = fail(rank, a.expect + ": " + std::to_string(want.size()) + " bytes, expected " +
                            std::to_string(global.size() * sizeof(double)));
      else if (std::memcmp(want.data(), global.data(), want.size()) != 0)
        rc = fail(rank, "the field restored in C++ differs from the one heat3d wrote");
    }
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    // And back: the same data, checkpointed from C++ with this decomposition.
    if (rc == 0 && !a.write.empty()) {
      o.dir = a.write;
      ckpt::Runtime out(MPI_COMM_WORLD, o);
      s = out.protect("u", u.data(), ckpt::DType::f64, box);
      if (s.ok()) s = out.annotate("u", "array_order", "c");
      if (s.ok()) s = out.protect_scalar("step", &step);
      if (s.ok()) s = out.checkpoint(step).wait();
      if (!s.ok()) rc = fail(rank, "checkpoint from C++: " + s.to_string());
    }
    if (rank == 0 && rc == 0)
      std::printf("cxx: ok: step %lld of [%llu, %llu, %llu] restored on %d ranks equals heat3d's field%s\n",
                  static_cast<long long>(a.step), static_cast<unsigned long long>(nz),
                  static_cast<unsigned long long>(ny), static_cast<unsigned long long>(nx), size,
                  a.write.empty() ? "" : "; written back from C++");
  }
  MPI_Finalize();
  return rc;
}
