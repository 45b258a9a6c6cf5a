// Writes checkpoints of known content for the `ckpt` tool tests, through the public API only.
//
//   mpiexec -n <np> gen_checkpoints <dir> <variant> [<transport> [<layout> [rollback]]]
//
// Two steps (10 and 20) go to <dir>. <layout> `series` writes them with layout series, one segment per
// step (segment_steps 1: step 10 in series.0, 20 in series.1); `rollback` writes two steps per segment
// and then commits step 15 (series.1), which rolls step 20 back: its record stays in series.0 beside
// step 10's, abandoned (a segment holding no step in force would be removed by retention). Every value is a function of
// the step, the global index and <variant> (0 or 1) only, never of the rank count, so that the 4-rank and 2-rank
// outputs of the same variant hold identical global arrays and uniform scalars. Variant 1 changes one element of
// grid/temp by 1e-3 and nothing else. The variables:
//   grid/temp       f64 global [16, 12], split along dimension 1 (columns); along dimension 0 (rows)
//                   with the hdf5 transports, which need blocks contiguous in the global array
//   grid/dens       f32 global [10, 4, 6], split unevenly along dimension 0
//   particles/id    i64 global [101], split unevenly
//   step            i64 scalar, uniform
//   time            f64 scalar, uniform
//   rank_info       i32 local [3] = {rank, nranks, 7}: differs per rank
//   blob            bytes local [16], the same on every rank (uniform)
// Exit status 0 on success; a message and 1 otherwise.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"

namespace {

/// [start, start + count) of `n` items for `rank` of `np`, the remainder spread over the first ranks.
void split(std::uint64_t n, int rank, int np, std::uint64_t& start, std::uint64_t& count) {
  const std::uint64_t base = n / np, extra = n % np, r = static_cast<std::uint64_t>(rank);
  start = r * base + std::min<std::uint64_t>(r, extra);
  count = base + (r < extra ? 1 : 0);
}

bool check(const ckpt::Status& s, const char* what) {
  if (s.ok()) return true;
  std::fprintf(stderr, "gen_checkpoints: %s: %s\n", what, s.to_string().c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, np = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 3 || argc > 6) {
    if (rank == 0)
      std::fprintf(stderr, "usage: gen_checkpoints <dir> <variant> [<transport> [<layout> [rollback | index2]]]\n");
    MPI_Finalize();
    return 1;
  }
  const std::string dir = argv[1];
  const int variant = std::atoi(argv[2]);
  const std::string transport = argc >= 4 ? argv[3] : "posix";
  const bool series = argc >= 5 && std::string(argv[4]) == "series";
  const bool rollback = argc == 6 && std::string(argv[5]) == "rollback";
  const bool index2 = argc == 6 && std::string(argv[5]) == "index2";  // the two-level index (index_format 2)
  const bool split_rows = transport.rfind("hdf5", 0) == 0;
  bool ok = true;
  {
    ckpt::Options opts = ckpt::Options::defaults();
    opts.dir = dir;
    opts.fsync = false;  // test data: durability is not what is tested here
    opts.keep = 10;
    opts.transport = transport;
    if (index2) opts.index_format = 2;
    if (series) {
      opts.layout = ckpt::Options::Layout::series;
      opts.segment_steps = rollback ? 2 : 1;
    }
    ckpt::Runtime rt(MPI_COMM_WORLD, opts);
    ok = check(rt.status(), "Runtime");

    // grid/temp: columns split (rows for hdf5): this rank's box is [y0, y0 + yn) x [x0, x0 + xn).
    const std::uint64_t ny = 16, nx = 12;
    std::uint64_t x0 = 0, xn = nx, y0 = 0, yn = ny;
    if (split_rows)
      split(ny, rank, np, y0, yn);
    else
      split(nx, rank, np, x0, xn);
    std::vector<double> temp(yn * xn);
    // grid/dens: planes split unevenly.
    const std::uint64_t nz = 10, n1 = 4, n2 = 6;
    std::uint64_t z0 = 0, zn = 0;
    split(nz, rank, np, z0, zn);
    std::vector<float> dens(zn * n1 * n2);
    // particles/id
    const std::uint64_t np_ids = 101;
    std::uint64_t p0 = 0, pn = 0;
    split(np_ids, rank, np, p0, pn);
    std::vector<std::int64_t> ids(pn);
    std::int64_t step = 0;
    double time = 0;
    std::int32_t rank_info[3] = {rank, np, 7};
    unsigned char blob[16];
    for (int i = 0; i < 16; ++i) blob[i] = static_cast<unsigned char>(0xA0 + i);

    auto fill = [&](std::int64_t s) {
      const double t = static_cast<double>(s);
      for (std::uint64_t j = 0; j < yn; ++j)
        for (std::uint64_t i = 0; i < xn; ++i) {
          const std::uint64_t gy = y0 + j, gx = x0 + i;
          double v = std::sin(0.1 * static_cast<double>(gy) + 0.01 * t) + 0.5 * static_cast<double>(gx);
          if (variant == 1 && gy == 3 && gx == 5) v += 1e-3;
          temp[j * xn + i] = v;
        }
      for (std::uint64_t k = 0; k < zn; ++k)
        for (std::uint64_t a = 0; a < n1; ++a)
          for (std::uint64_t b = 0; b < n2; ++b)
            dens[(k * n1 + a) * n2 + b] =
                static_cast<float>(1.0 + 0.25 * static_cast<double>(z0 + k) + 0.125 * static_cast<double>(a) +
                                   0.0625 * static_cast<double>(b) + 0.001 * t);
      for (std::uint64_t i = 0; i < pn; ++i)
        ids[i] = static_cast<std::int64_t>(1000 * s) + static_cast<std::int64_t>(p0 + i) - 50;
      step = s;
      time = 0.5 * t;
    };

    if (ok)
      ok = check(rt.protect("grid/temp", temp.data(), ckpt::DType::f64, ckpt::Block{{ny, nx}, {y0, x0}, {yn, xn}}),
                 "protect grid/temp");
    if (ok)
      ok = check(
          rt.protect("grid/dens", dens.data(), ckpt::DType::f32, ckpt::Block{{nz, n1, n2}, {z0, 0, 0}, {zn, n1, n2}}),
          "protect grid/dens");
    if (ok)
      ok = check(rt.protect("particles/id", ids.data(), ckpt::DType::i64, ckpt::Block{{np_ids}, {p0}, {pn}}),
                 "protect particles/id");
    if (ok) ok = check(rt.protect_scalar("step", &step), "protect step");
    if (ok) ok = check(rt.protect_scalar("time", &time), "protect time");
    if (ok) ok = check(rt.protect("rank_info", rank_info, ckpt::DType::i32, ckpt::Shape{3}), "protect rank_info");
    if (ok) ok = check(rt.protect("blob", blob, ckpt::DType::bytes, ckpt::Shape{16}), "protect blob");
    if (ok) ok = check(rt.annotate("grid/temp", "units", "K"), "annotate");
    for (std::int64_t s : rollback ? std::vector<std::int64_t>{10, 20, 15} : std::vector<std::int64_t>{10, 20}) {
      if (!ok) break;
      fill(s);
      ok = check(rt.checkpoint(s).wait(), "checkpoint");
    }
    if (ok) ok = check(rt.wait_all(), "wait_all");
    // The destructor closes the Runtime (collective).
  }
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
