// perf/incremental: incremental checkpoints (option incremental, issue 36) against full ones, in the same
// run, on a sparse-update pattern: a state of --mib MiB per rank (one f64 array) of which a fraction of
// the pieces changes between checkpoints.
//  - patterns: `random` (that fraction of the pieces, chosen at random each step, one element of each
//    changed) and `clustered` (a contiguous run of that many pieces at a random start).
//  - for each pattern and fraction, the two variants alternate in every repetition: `full` (incremental
//    off) and `incremental` (on, a full checkpoint every --chain checkpoints). A repetition writes a
//    chain: checkpoint 1 (full in both), then --chain - 1 checkpoints after an update each; every
//    checkpoint is waited for (fsync on: durable) before the next update. Per checkpoint after the first:
//    bytes written (all ranks), the blocked time (checkpoint()'s return) and the time to durable
//    (checkpoint() to its ticket done, the slowest rank); the run time of the whole chain (update +
//    checkpoint + wait) too. Medians over the checkpoints of every repetition.
//  - --compute-ms M: the application computes (a memory-bound sweep of its state) for M ms after each
//    checkpoint instead of waiting for it, as a code that checkpoints every step does: the checkpoints are
//    flushed while it computes (max_in_flight 1: the next checkpoint() waits for the previous commit), the
//    run time is the whole chain's, time to durable comes from each ticket (durable_s).
//  - restart: after each chain a fresh Runtime restarts its last step (the incremental one reads pieces from
//    up to --chain checkpoints); the data were written with O_DIRECT, so mostly not in the page cache.
//  - the peer's approach (FTI's differential checkpointing, dcp_block_size 16 KiB): the same updates
//    cut into 16 KiB blocks, XXH3-128 of every block on the host; the bytes it would write and its
//    hashing rate, against ckpt's pieces on the same data.
//
//   mpiexec -n 2 build/perf/incremental --mib 256 --fractions 1,10,50,100 --reps 3 --dir /tmp/ckpt-incr
//   mpiexec -n 2 build/perf/incremental --mib 256 --fractions 100 --compute-ms 500 --reps 3 --dir /tmp/ckpt-incr
#include <mpi.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {

void must(const ckpt::Status& s, const char* what) {
  if (!s.ok()) abort_job("incremental", std::string(what) + ": " + s.to_string());
}

/// The pieces (of `piece` bytes) changed by one update: `fraction` percent of `n`, random or clustered.
std::vector<std::uint64_t> pick(std::uint64_t n, double fraction, bool clustered, std::mt19937_64& rng) {
  const auto k = std::min<std::uint64_t>(n, static_cast<std::uint64_t>(static_cast<double>(n) * fraction / 100 + 0.5));
  std::vector<std::uint64_t> out;
  if (clustered) {
    const std::uint64_t start = k == n ? 0 : rng() % (n - k + 1);
    for (std::uint64_t i = 0; i < k; ++i) out.push_back(start + i);
    return out;
  }
  std::vector<std::uint64_t> all(n);
  for (std::uint64_t i = 0; i < n; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  out.assign(all.begin(), all.begin() + static_cast<long>(k));
  return out;
}

struct Figures {
  std::vector<double> bytes, blocked, durable, run, restart;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::string dir = "/tmp/ckpt-incr", fractions_arg = "1,10,50,100", patterns_arg = "random,clustered";
  std::uint64_t mib = 256;
  int reps = 3, chain = 10, compute_ms = 0;
  double sink = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mib")
      mib = std::stoull(v);
    else if (k == "--fractions")
      fractions_arg = v;
    else if (k == "--patterns")
      patterns_arg = v;
    else if (k == "--reps")
      reps = std::stoi(v);
    else if (k == "--chain")
      chain = std::stoi(v);
    else if (k == "--compute-ms")
      compute_ms = std::stoi(v);
    else if (k == "--dir")
      dir = v;
    else
      abort_job("incremental", "unknown option " + k);
  }
  const int rank = world_rank();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ckpt::Options base;  // defaults + CKPT_*
  must(base.error, "options");
  base.index_format = 2;
  base.fsync = true;
  base.keep = 2;
  base.incremental_full_every = chain;
  const std::uint64_t piece = base.incremental_piece_bytes;
  const std::uint64_t n = mib << 20 >> 3, pieces = (n * 8 + piece - 1) / piece, per_piece = piece / 8;
  std::vector<double> state(n);
  for (std::uint64_t i = 0; i < n; ++i) state[i] = static_cast<double>(i) + rank * 1e12;
  if (rank == 0)
    std::printf("incremental: %d rank(s), %llu MiB per rank, piece %llu KiB, chains of %d, %d reps, dir %s\n", size,
                static_cast<unsigned long long>(mib), static_cast<unsigned long long>(piece >> 10), chain, reps,
                dir.c_str());
  if (rank == 0)
    std::printf("%-9s %5s | %9s %9s | %8s %8s %8s %8s %8s | %9s %8s\n", "pattern", "%", "full MiB", "incr MiB", "bytes",
                "durable", "blocked", "run", "restart", "16K MiB", "16K/incr");
  std::mt19937_64 rng(12345 + static_cast<std::uint64_t>(rank));
  double step_value = 1;
  for (const std::string& pattern : split_list(patterns_arg))
    for (const std::string& f : split_list(fractions_arg)) {
      const double fraction = std::stod(f);
      Figures fig[2];
      double bytes16 = 0, hash16_s = 0;  // the peer's approach, summed over the updates (incremental variant's)
      std::uint64_t updates = 0;
      for (int r = 0; r < reps; ++r)
        for (int v = 0; v < 2; ++v) {
          const std::string vdir = dir + "/" + (v == 0 ? "full" : "incremental");
          if (rank == 0) std::filesystem::remove_all(vdir);  // each chain starts afresh
          MPI_Barrier(MPI_COMM_WORLD);
          ckpt::Options o = base;
          o.dir = vdir;
          o.incremental = v == 1;
          ckpt::Runtime rt(MPI_COMM_WORLD, o);
          must(rt.status(), "Runtime");
          must(rt.protect("state", state.data(), ckpt::DType::f64, {n}), "protect");
          must(rt.checkpoint(1).wait(), "first checkpoint");
          MPI_Barrier(MPI_COMM_WORLD);
          const auto run0 = Clock::now();
          double peer_s = 0;  // the peer's hashing, not part of the run
          std::vector<ckpt::Ticket> tickets;
          for (int s = 2; s <= chain; ++s) {
            const auto changed = pick(pieces, fraction, pattern == "clustered", rng);
            step_value += 1;
            for (std::uint64_t p : changed)
              state[std::min(n - 1, p * per_piece + static_cast<std::uint64_t>(rng() % per_piece))] = step_value;
            if (v == 1) {  // the peer: hash every 16 KiB block, count the changed ones (one per changed piece)
              const auto h0 = Clock::now();
              std::uint64_t acc = 0;
              for (std::uint64_t off = 0; off < n * 8; off += 16384)
                acc ^= XXH3_128bits(reinterpret_cast<const char*>(state.data()) + off,
                                    std::min<std::uint64_t>(16384, n * 8 - off))
                           .low64;
              const double t = since(h0) + (acc == 42 ? 1e-12 : 0);
              hash16_s += t;
              peer_s += t;
              bytes16 += static_cast<double>(sum_over_ranks(static_cast<std::uint64_t>(changed.size()) * 16384));
              ++updates;
            }
            const auto t0 = Clock::now();
            ckpt::Ticket tk = rt.checkpoint(s);
            fig[v].blocked.push_back(max_over_ranks(since(t0)));
            if (compute_ms == 0) {
              must(tk.wait(), "checkpoint");
              fig[v].durable.push_back(max_over_ranks(since(t0)));
              fig[v].bytes.push_back(static_cast<double>(sum_over_ranks(tk.stats().bytes_written)));
              continue;
            }
            tickets.push_back(tk);
            // The application computes on while the checkpoint is flushed: a memory-bound sweep of its state.
            const auto c0 = Clock::now();
            double acc = 0;
            while (since(c0) * 1e3 < compute_ms)
              for (std::uint64_t i = 0; i < n; i += 8) acc += state[i];
            sink += acc;
          }
          for (ckpt::Ticket& tk : tickets) {  // --compute-ms: figures from the tickets' own clocks
            must(tk.wait(), "checkpoint");
            fig[v].durable.push_back(max_over_ranks(tk.stats().durable_s));
            fig[v].bytes.push_back(static_cast<double>(sum_over_ranks(tk.stats().bytes_written)));
          }
          fig[v].run.push_back(max_over_ranks(since(run0) - peer_s));
          must(rt.close(), "close");
          {  // restart the chain's last step
            std::vector<double> back(n);
            ckpt::Options ro = o;
            ckpt::Runtime rr(MPI_COMM_WORLD, ro);
            must(rr.protect("state", back.data(), ckpt::DType::f64, {n}), "protect (restart)");
            MPI_Barrier(MPI_COMM_WORLD);
            const auto t0 = Clock::now();
            must(rr.restart(chain), "restart");
            fig[v].restart.push_back(max_over_ranks(since(t0)));
            if (back != state) abort_job("incremental", "the restart did not give the state back");
            must(rr.close(), "close (restart)");
          }
        }
      if (rank == 0) {
        const double full_mib = median(fig[0].bytes) / (1 << 20), incr_mib = median(fig[1].bytes) / (1 << 20);
        const double peer_mib = bytes16 / static_cast<double>(updates) / (1 << 20);
        std::printf("%-9s %5s | %9.1f %9.1f | %8.3f %8.3f %8.3f %8.3f %8.3f | %9.2f %8.3f\n", pattern.c_str(),
                    f.c_str(), full_mib, incr_mib, median(fig[1].bytes) / median(fig[0].bytes),
                    median(fig[1].durable) / median(fig[0].durable), median(fig[1].blocked) / median(fig[0].blocked),
                    median(fig[1].run) / median(fig[0].run), median(fig[1].restart) / median(fig[0].restart), peer_mib,
                    peer_mib / incr_mib);
        std::printf(
            "          durable ms: full %.1f, incremental %.1f; restart ms: full %.1f, incremental %.1f; "
            "16 KiB hashing %.2f GB/s per rank\n",
            1e3 * median(fig[0].durable), 1e3 * median(fig[1].durable), 1e3 * median(fig[0].restart),
            1e3 * median(fig[1].restart), static_cast<double>(updates) * static_cast<double>(n * 8) / hash16_s / 1e9);
      }
    }
  if (sink == 42) std::printf(" ");  // keeps the compute
  MPI_Finalize();
  return 0;
}
