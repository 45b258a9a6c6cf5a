// mini_amr: a proxy of Mantevo miniAMR checkpointed through ckpt (see README.md). Cubic blocks with
// ghost cells, each its own allocation, refine around a moving sphere and coarsen behind it; a
// partitioner splits them along the Morton curve after every regrid, and blocks move between ranks.
//
//   mpiexec -n 4 mini_amr --steps 48 --checkpoint-every 4 --dir /tmp/amr --output final.txt
//   mpiexec -n 3 mini_amr --steps 48 --checkpoint-every 4 --dir /tmp/amr --restart --output final.txt
//
// The checkpoint glue - the lines that exist only for checkpointing - lies between `ckpt-glue begin`
// and `ckpt-glue end` comments; tools/glue_lines.py counts it.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

// ckpt-glue begin
#include "ckpt/ckpt.hpp"
// ckpt-glue end
#include "mesh.hpp"

namespace {

struct Args {
  long long steps = -1;
  std::string output;
  mini_amr::Params p;
  // ckpt-glue begin
  long long every = 0, delay_ms = 0;
  std::string dir = "mini_amr.ckpt";
  bool restart = false;
  // ckpt-glue end
};

int g_rank = 0;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  if (g_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

const char* const kUsage =
    "usage: mini_amr --steps N [--output FILE] [--nroot R] [--cells C] [--vars V] [--max-level L] [--regrid-every G]\n"
    // ckpt-glue begin
    "                [--dir DIR] [--checkpoint-every K] [--restart] [--delay-ms MS]\n"
    "  --dir DIR             the checkpoint directory (mini_amr.ckpt)\n"
    "  --checkpoint-every K  checkpoint after every K-th step (0: never)\n"
    "  --restart             continue from the newest checkpoint in DIR, on any rank count\n"
    "  --delay-ms MS         sleep MS ms per step (a heavier step: a test kills the run part way)\n"
    // ckpt-glue end
    "  --output FILE         each block's id, level, coordinates and interior hash, in id order\n";

bool parse(int argc, char** argv, Args& a) {
  auto number = [](long long& out, long long lo, long long hi) {
    return [&out, lo, hi](const std::string& v) {
      out = std::stoll(v);
      return out >= lo && out <= hi;
    };
  };
  long long nroot = a.p.nroot, cells = a.p.cells, vars = a.p.nvars, level = a.p.max_level, regrid = a.p.regrid_every;
  const std::map<std::string, std::function<bool(const std::string&)>> options = {
      {"--steps", number(a.steps, 0, 1LL << 40)},
      {"--nroot", number(nroot, 1, 16)},
      {"--cells", number(cells, 2, 64)},
      {"--vars", number(vars, 1, 64)},
      {"--max-level", number(level, 0, mini_amr::kDepth)},
      {"--regrid-every", number(regrid, 1, 1LL << 40)},
      {"--output", [&a](const std::string& v) { return !(a.output = v).empty(); }},
      // ckpt-glue begin
      {"--checkpoint-every", number(a.every, 0, 1LL << 40)},
      {"--delay-ms", number(a.delay_ms, 0, 60000)},
      {"--dir", [&a](const std::string& v) { return !(a.dir = v).empty(); }},
      // ckpt-glue end
  };
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    // ckpt-glue begin
    if (s == "--restart") {
      a.restart = true;
      continue;
    }
    // ckpt-glue end
    auto it = options.find(s);
    try {
      if (it == options.end() || i + 1 == argc || !it->second(argv[++i])) throw std::invalid_argument(s);
    } catch (const std::exception&) {
      say("mini_amr: bad option or value: %s\n%s", s.c_str(), kUsage);
      return false;
    }
  }
  a.p = {static_cast<int>(nroot), static_cast<int>(cells), static_cast<int>(vars), static_cast<int>(level),
         static_cast<int>(regrid)};
  if (a.steps < 0 || cells % 2 != 0) {
    say("mini_amr: --steps is required, --cells must be even\n%s", kUsage);
    return false;
  }
  return true;
}

// ckpt-glue begin
/// Registers this rank's blocks as the rows of the joined array "blocks" - one row per block, its
/// interior (a box of its ghosted allocation), no packing - and their ids as the joined key column
/// "block_id". Protects the first time; afterwards (blocks refined, coarsened, moved) re-points both.
ckpt::Status sync_blocks(ckpt::Runtime& rt, mini_amr::Mesh& mesh, std::vector<std::int64_t>& ids) {
  const mini_amr::Params& p = mesh.params();
  const int n = p.cells, m = p.cells + 2;
  ckpt::Scattered rows{{p.nvars, n, n, n}, {}, ckpt::MemorySelection{{0, 1, 1, 1}, {p.nvars, m, m, m}}};
  ids.clear();
  for (mini_amr::Block& b : mesh.blocks()) {
    rows.pieces.push_back(ckpt::Piece{b.u.get(), 1});
    ids.push_back(b.id);
  }
  CKPT_RETURN_IF_ERROR(rt.protect_or_update("blocks", ckpt::DType::f64, rows));
  return rt.protect_or_update("block_id", ids.data(), ckpt::DType::i64, ckpt::Joined{{ids.size()}});
}

/// Restarts from the newest checkpoint that restores (older ones if it does not), on this rank count:
/// the block ids come from the checkpoint's index and key column, the partitioner of this rank count
/// says which blocks this rank owns and allocates them, and ckpt fills each one by its id.
ckpt::Result<std::int64_t> restart(ckpt::Runtime& rt, mini_amr::Mesh& mesh, std::vector<std::int64_t>& ids) {
  ckpt::Result<std::vector<std::int64_t>> steps = rt.steps();
  if (!steps.ok()) return steps.status();
  ckpt::Status why(ckpt::Code::not_found, "no complete checkpoint in " + rt.options().dir);
  for (auto step = steps->rbegin(); step != steps->rend(); ++step) {
    ckpt::Result<ckpt::CheckpointReader> stored = rt.inspect(*step);
    ckpt::Result<ckpt::VariableInfo> var = stored.ok() ? stored->variable("block_id") : stored.status();
    std::vector<std::int64_t> all(var.ok() ? var->shape.at(0) : 0);
    why = var.ok() ? stored.value().read("block_id", all.data(), all.size() * sizeof(std::int64_t)) : var.status();
    if (!why.ok()) continue;
    mesh.set_leaves(all);
    why = sync_blocks(rt, mesh, ids);
    if (why.ok()) why = rt.set_restart_keys("blocks", "block_id", ids);
    if (why.ok()) why = rt.set_restart_keys("block_id", "block_id", ids);
    if (why.ok()) why = rt.restart(*step);
    if (why.ok()) return *step;
  }
  return why;
}
// ckpt-glue end

int run(const Args& a) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mini_amr::Mesh mesh(MPI_COMM_WORLD, a.p);
  std::int64_t step = 0;
  // ckpt-glue begin
  ckpt::Options options;
  options.dir = a.dir;
  ckpt::Runtime rt(MPI_COMM_WORLD, options);
  std::vector<std::int64_t> ids;  // this rank's block ids: the key column
  ckpt::Status st = rt.status().ok() ? rt.protect_scalar("step", &step) : rt.status();
  bool restored = false;
  if (st.ok() && a.restart) {
    ckpt::Result<std::int64_t> r = restart(rt, mesh, ids);
    restored = r.ok();
    if (restored)
      say("restored: step %lld, %zu blocks, on %d ranks\n", static_cast<long long>(r.value()), mesh.global_blocks(),
          size);
    else if (r.status().code() == ckpt::Code::not_found)
      say("restart: %s; starting from step 0\n", r.status().message().c_str());
    else
      st = r.status();
  }
  if (!st.ok()) {
    say("mini_amr: %s\n", st.to_string().c_str());
    return 1;
  }
  const long long first_step = step;  // where this run starts: after a restart, not 0
  // ckpt-glue end
  if (!restored) mesh.init();
  std::size_t min_blocks = mesh.global_blocks(), max_blocks = min_blocks;
  int regrids = 0;
  while (step < a.steps) {
    if (step % a.p.regrid_every == 0 && mesh.regrid(step)) ++regrids;
    min_blocks = std::min(min_blocks, mesh.global_blocks()), max_blocks = std::max(max_blocks, mesh.global_blocks());
    mesh.advance(step);
    ++step;
    if (a.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
    // ckpt-glue begin
    if (a.every > 0 && step % a.every == 0) {
      st = sync_blocks(rt, mesh, ids);
      if (!st.ok()) break;
      rt.checkpoint(step);  // returns once captured; a failure is reported by wait_all()
    }
    // ckpt-glue end
  }
  // ckpt-glue begin
  if (st.ok()) st = rt.wait_all();
  if (!st.ok()) {
    say("mini_amr: checkpoint: %s\n", st.to_string().c_str());
    return 1;
  }
  // ckpt-glue end
  long long moved = 0, mine = mesh.moved_in();
  MPI_Reduce(&mine, &moved, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  say("summary: steps %lld..%lld, %zu blocks (%zu..%zu during the run), %d regrids, %lld blocks moved between "
      "ranks, %d ranks\n",
      first_step, static_cast<long long>(step), mesh.global_blocks(), min_blocks, max_blocks, regrids, moved, size);
  const std::string state = mesh.dump(a.output);
  say("state: %s\n", state.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  Args a;
  int rc = 2;
  if (parse(argc, argv, a)) {
    try {
      rc = run(a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mini_amr (rank %d): %s\n", g_rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  MPI_Finalize();
  return rc;
}
