// Writes one checkpoint (step 20) of an AMR-like state held in joined arrays, for `ckpt diff --key`.
//
//   mpiexec -n <np> gen_joined <dir> <variant> [<transport> [directory]]
//
// 24 blocks, block b with id 1000 + 7b, owned by rank (3b + 1) % np. Each rank registers the rows of the
// blocks it owns (ascending b on 4 ranks or fewer than 2, descending otherwise, as after a load balance),
// so the stored row order depends on the rank count while the state (every block's values) does not:
//   blocks/id     i64 joined [rows]     the key
//   blocks/rho    f64 joined [rows, 4]  rho(b, j) = id + 0.25 j
//   blocks/level  i32 joined [rows]     b % 3
//   blocks/uid    u16 joined [rows]     the id again, as an unsigned 16-bit key
//   blocks/fid    f64 joined [rows]     the id as a double (not a key: not an integer)
//   blocks/pair   i64 joined [rows, 2]  {id, b} (not a key: two values per row)
//   tracers/x     f64 joined [10]       0.5 t for tracer t, rows split evenly over the ranks in order (not
//                                       the blocks' rows: compared by position)
//   time          f64 scalar            2.5
// Variants: 0 the state above; 1 rho(5, 2) + 1e-3; 2 block 7 missing and a block of id 9999 added;
// 3 block 11 holds the id of block 4 (a key value held by two rows).
// Exit status 0 on success; a message and 1 otherwise.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"

namespace {
bool check(const ckpt::Status& s, const char* what) {
  if (s.ok()) return true;
  std::fprintf(stderr, "gen_joined: %s: %s\n", what, s.to_string().c_str());
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, np = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 3 || argc > 5) {
    if (rank == 0) std::fprintf(stderr, "usage: gen_joined <dir> <variant> [<transport> [directory]]\n");
    MPI_Finalize();
    return 1;
  }
  const int variant = std::atoi(argv[2]);
  bool ok = true;
  {
    ckpt::Options opts = ckpt::Options::defaults();
    opts.dir = argv[1];
    opts.fsync = false;  // test data
    opts.transport = argc >= 4 ? argv[3] : "posix";
    ckpt::Runtime rt(MPI_COMM_WORLD, opts);
    ok = check(rt.status(), "Runtime");

    const int nblocks = 24;
    std::vector<int> mine;  // the blocks this rank owns, in the order it stores them
    for (int b = 0; b < nblocks; ++b)
      if ((3 * b + 1) % np == rank && !(variant == 2 && b == 7)) mine.push_back(b);
    if (np > 1 && np < 4) std::reverse(mine.begin(), mine.end());
    if (variant == 2 && rank == np - 1) mine.push_back(-1);  // the extra block
    const std::size_t n = mine.size();
    std::vector<std::int64_t> id(n), pair(2 * n);
    std::vector<double> rho(4 * n), fid(n);
    std::vector<std::int32_t> level(n);
    std::vector<std::uint16_t> uid(n);
    for (std::size_t i = 0; i < n; ++i) {
      const int b = mine[i];
      id[i] = b < 0 ? 9999 : 1000 + 7 * (variant == 3 && b == 11 ? 4 : b);
      for (int j = 0; j < 4; ++j) rho[4 * i + j] = static_cast<double>(id[i]) + 0.25 * j;
      if (variant == 3 && b == 11)  // the values of block 11, under block 4's id
        for (int j = 0; j < 4; ++j) rho[4 * i + j] = 1000 + 7 * 11 + 0.25 * j;
      if (variant == 1 && b == 5) rho[4 * i + 2] += 1e-3;
      level[i] = b < 0 ? 0 : b % 3;
      uid[i] = static_cast<std::uint16_t>(id[i]);
      fid[i] = static_cast<double>(id[i]);
      pair[2 * i] = id[i];
      pair[2 * i + 1] = b;
    }
    const std::uint64_t t0 = 10 * static_cast<std::uint64_t>(rank) / np,
                        t1 = 10 * static_cast<std::uint64_t>(rank + 1) / np;
    std::vector<double> tracers;
    for (std::uint64_t t = t0; t < t1; ++t) tracers.push_back(0.5 * static_cast<double>(t));
    double time = 2.5;
    const std::uint64_t rows = n;
    ok = ok && check(rt.protect("blocks/id", id.data(), ckpt::DType::i64, ckpt::Joined{{rows}, {}}), "blocks/id");
    ok = ok && check(rt.protect("blocks/rho", rho.data(), ckpt::DType::f64, ckpt::Joined{{rows, 4u}, {}}), "rho");
    ok = ok && check(rt.protect("blocks/level", level.data(), ckpt::DType::i32, ckpt::Joined{{rows}, {}}), "level");
    ok = ok && check(rt.protect("blocks/uid", uid.data(), ckpt::DType::u16, ckpt::Joined{{rows}, {}}), "uid");
    ok = ok && check(rt.protect("blocks/fid", fid.data(), ckpt::DType::f64, ckpt::Joined{{rows}, {}}), "fid");
    ok = ok && check(rt.protect("blocks/pair", pair.data(), ckpt::DType::i64, ckpt::Joined{{rows, 2u}, {}}), "pair");
    ok = ok &&
         check(rt.protect("tracers/x", tracers.data(), ckpt::DType::f64, ckpt::Joined{{t1 - t0}, {}}), "tracers/x");
    ok = ok && check(rt.protect_scalar("time", &time), "time");
    if (ok) ok = check(rt.checkpoint(20).wait(), "checkpoint 20");
    ok = check(rt.close(), "close") && ok;
  }
  int all = ok ? 1 : 0, every = 0;
  MPI_Allreduce(&all, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return every ? 0 : 1;
}
