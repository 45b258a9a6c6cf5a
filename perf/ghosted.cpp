// perf/ghosted: the blocked time of a checkpoint of ghosted blocks (memory selections, issue 35)
// against the same bytes stored from contiguous memory, and against what a code without selections
// does (pack the interiors into one buffer, then checkpoint it), measured in the same run.
//  - shapes: `amr` - many separately allocated 3D blocks of n^3 cells with g ghost layers (miniAMR:
//    rows of n doubles, the worst case for a row-by-row copy), one region per block; `slab` - one
//    large 3D array with g ghost layers (rows of thousands of doubles).
//  - variants, interleaved in every repetition: `contiguous` (the interiors as packed regions: the
//    bound), `selection` (the ghosted allocations with set_memory_selection, one region per block),
//    `scattered` (the ghosted allocations as the pieces of one Scattered region, one row per block),
//    `pack` (the application packs every interior into one buffer it registered, inside the timed
//    region, as miniAMR's glue did).
// checkpoint() is timed from the call to its return (what the application waits for); the ticket
// is waited for outside the timed region. Medians over --reps; ratios to contiguous. fsync off and
// transport posix to --dir: the flush is not what is measured.
//
//   mpiexec -n 1 build/perf/ghosted --shape amr --n 16 --g 1 --blocks 512 --reps 21 --dir /tmp/ckpt-ghosted
//   mpiexec -n 1 build/perf/ghosted --shape slab --n 256 --g 2 --reps 21 --dir /tmp/ckpt-ghosted
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {

struct Geometry {
  std::uint64_t nz, ny, nx;  // interior
  std::uint64_t g;           // ghost layers on each side
  std::uint64_t blocks;
  std::uint64_t az() const { return nz + 2 * g; }
  std::uint64_t ay() const { return ny + 2 * g; }
  std::uint64_t ax() const { return nx + 2 * g; }
  std::uint64_t alloc() const { return az() * ay() * ax(); }
  std::uint64_t interior() const { return nz * ny * nx; }
};

/// Copies the interior of `a` (one ghosted block) to `out`, packed: what an application without memory
/// selections does before every checkpoint.
void pack(const Geometry& geo, const double* a, double* out) {
  for (std::uint64_t z = 0; z < geo.nz; ++z)
    for (std::uint64_t y = 0; y < geo.ny; ++y) {
      std::memcpy(out, a + ((z + geo.g) * geo.ay() + y + geo.g) * geo.ax() + geo.g, geo.nx * sizeof(double));
      out += geo.nx;
    }
}

void must(const ckpt::Status& s, const char* what) {
  if (!s.ok()) abort_job("ghosted", std::string(what) + ": " + s.to_string());
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::string shape = "amr", dir = "/tmp/ckpt-ghosted";
  std::uint64_t n = 16, g = 1, blocks = 512;
  int reps = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--shape")
      shape = v;
    else if (k == "--n")
      n = std::stoull(v);
    else if (k == "--g")
      g = std::stoull(v);
    else if (k == "--blocks")
      blocks = std::stoull(v);
    else if (k == "--reps")
      reps = std::stoi(v);
    else if (k == "--dir")
      dir = v;
    else
      abort_job("ghosted", "unknown option " + k);
  }
  Geometry geo{n, n, n, g, blocks};
  if (shape == "slab")
    geo = Geometry{n / 4, n, n, g, 1};  // n/4 planes of n x n
  else if (shape != "amr")
    abort_job("ghosted", "--shape is amr or slab");
  const int rank = world_rank();

  // The application's state: ghosted blocks, and the same interiors packed (the bound's memory).
  std::vector<std::vector<double>> ghosted(geo.blocks), packed(geo.blocks);
  for (std::uint64_t b = 0; b < geo.blocks; ++b) {
    ghosted[b].assign(geo.alloc(), -1.0);
    packed[b].resize(geo.interior());
    for (std::uint64_t i = 0; i < geo.alloc(); ++i) ghosted[b][i] = static_cast<double>(b * geo.alloc() + i);
    pack(geo, ghosted[b].data(), packed[b].data());
  }
  std::vector<double> buffer(geo.blocks * geo.interior());  // the pack variant's one buffer
  const double mib = static_cast<double>(geo.blocks * geo.interior() * sizeof(double)) / (1 << 20);

  ckpt::Options o;  // defaults + CKPT_*
  must(o.error, "options");
  o.fsync = false;
  o.keep = 1;
  constexpr int kVariants = 4, kPack = 3;
  const char* names[kVariants] = {"contiguous", "selection", "scattered", "pack"};
  if (rank == 0) std::filesystem::remove_all(dir);  // a run starts afresh (no roll-back of an earlier run's steps)
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::unique_ptr<ckpt::Runtime>> rts;
  for (int v = 0; v < kVariants; ++v) {
    o.dir = dir + "/" + names[v];
    rts.push_back(std::make_unique<ckpt::Runtime>(MPI_COMM_WORLD, o));
    ckpt::Runtime& rt = *rts.back();
    must(rt.status(), "Runtime");
    if (v == kPack) {
      must(rt.protect("blocks", buffer.data(), ckpt::DType::f64, {buffer.size()}), "protect");
      must(rt.checkpoint(0).wait(), "warm-up checkpoint");
      continue;
    }
    if (v == 2) {
      ckpt::Scattered s{{geo.nz, geo.ny, geo.nx}, {}, {{geo.g, geo.g, geo.g}, {geo.az(), geo.ay(), geo.ax()}}};
      for (std::uint64_t b = 0; b < geo.blocks; ++b) s.pieces.push_back(ckpt::Piece{ghosted[b].data(), 1});
      must(rt.protect("blocks", ckpt::DType::f64, s), "protect");
      must(rt.checkpoint(0).wait(), "warm-up checkpoint");
      continue;
    }
    for (std::uint64_t b = 0; b < geo.blocks; ++b) {
      const std::string name = "b/" + std::to_string(b);
      if (v == 0) {
        must(rt.protect(name, packed[b].data(), ckpt::DType::f64, {geo.nz, geo.ny, geo.nx}), "protect");
      } else {
        must(rt.protect(name, ghosted[b].data(), ckpt::DType::f64, {geo.nz, geo.ny, geo.nx}), "protect");
        must(
            rt.set_memory_selection(name, ckpt::MemorySelection{{geo.g, geo.g, geo.g}, {geo.az(), geo.ay(), geo.ax()}}),
            "set_memory_selection");
      }
    }
    must(rt.checkpoint(0).wait(), "warm-up checkpoint");  // allocates and touches the staging pool once
  }
  std::vector<double> t[kVariants];
  for (int r = 0; r < reps; ++r)
    for (int v = 0; v < kVariants; ++v) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = Clock::now();
      if (v == kPack)
        for (std::uint64_t b = 0; b < geo.blocks; ++b) pack(geo, ghosted[b].data(), buffer.data() + b * geo.interior());
      ckpt::Ticket tk = rts[static_cast<std::size_t>(v)]->checkpoint(r + 1);
      t[v].push_back(max_over_ranks(since(t0)));
      must(tk.wait(), "checkpoint");
    }
  for (auto& rt : rts) must(rt->close(), "close");
  if (rank == 0) {
    const double c = median(t[0]);
    std::printf(
        "ghosted (%s): %llu block(s) of %llux%llux%llu cells, %llu ghost layer(s), %.1f MiB per rank, %d reps\n",
        shape.c_str(), static_cast<unsigned long long>(geo.blocks), static_cast<unsigned long long>(geo.nz),
        static_cast<unsigned long long>(geo.ny), static_cast<unsigned long long>(geo.nx),
        static_cast<unsigned long long>(geo.g), mib, reps);
    std::printf("%-11s %12s %12s\n", "variant", "blocked ms", "/contiguous");
    for (int v = 0; v < kVariants; ++v)
      std::printf("%-11s %12.3f %12.2f\n", names[v], 1e3 * median(t[v]), median(t[v]) / c);
  }
  MPI_Finalize();
  return 0;
}
