#include "mesh.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

namespace mini_amr {
namespace {

std::uint64_t spread(std::uint64_t x) {  // bit b of x to bit 3b
  std::uint64_t r = 0;
  for (int b = 0; b < 16; ++b) r |= ((x >> b) & 1u) << (3 * b);
  return r;
}

std::uint64_t compact(std::uint64_t m) {  // bit 3b of m to bit b
  std::uint64_t r = 0;
  for (int b = 0; b < 16; ++b) r |= ((m >> (3 * b)) & 1u) << b;
  return r;
}

Key child(const Key& k, int c) {
  return {k.level + 1, 2 * k.i + (c & 1), 2 * k.j + ((c >> 1) & 1), 2 * k.k + (c >> 2)};
}

std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (std::size_t n = 0; n < bytes; ++n) h = (h ^ p[n]) * 1099511628211ull;
  return h;
}

/// A block's interior: in a ghosted allocation (g = 1) or packed (g = 0).
struct View {
  const double* p;
  int n, g;
  double operator()(int v, int x, int y, int z) const {
    const int m = n + 2 * g;
    return p[((static_cast<std::size_t>(v) * m + x + g) * m + y + g) * m + z + g];
  }
};

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI failure in ") + what);
}

}  // namespace

std::int64_t id_of(const Key& k) {
  const int s = kDepth - k.level;
  const std::uint64_t m = spread(static_cast<std::uint64_t>(k.i) << s) |
                          spread(static_cast<std::uint64_t>(k.j) << s) << 1 |
                          spread(static_cast<std::uint64_t>(k.k) << s) << 2;
  return static_cast<std::int64_t>(m << 4 | static_cast<std::uint64_t>(k.level));
}

Key key_of(std::int64_t id) {
  const int level = static_cast<int>(id & 15), s = kDepth - level;
  const std::uint64_t m = static_cast<std::uint64_t>(id) >> 4;
  return {level, static_cast<int>(compact(m) >> s), static_cast<int>(compact(m >> 1) >> s),
          static_cast<int>(compact(m >> 2) >> s)};
}

Mesh::Mesh(MPI_Comm comm, const Params& p) : m_comm(comm), m_p(p), m_m(p.cells + 2) {
  MPI_Comm_rank(comm, &m_rank);
  MPI_Comm_size(comm, &m_size);
}

std::int64_t Mesh::first(int r, std::size_t n) const { return static_cast<std::int64_t>(n) * r / m_size; }

int Mesh::owner(std::int64_t index, std::size_t n) const {
  int r = static_cast<int>(index * m_size / static_cast<std::int64_t>(std::max<std::size_t>(n, 1)));
  while (first(r + 1, n) <= index) ++r;
  while (first(r, n) > index) --r;
  return r;
}

std::unique_ptr<double[]> Mesh::allocate() const {
  std::unique_ptr<double[]> u(new double[allocated()]);
  std::fill(u.get(), u.get() + allocated(), 0.0);
  return u;
}

int Mesh::want(const Key& k, std::int64_t step) const {
  // The sphere goes round a tilted orbit once every 64 steps; a block that it touches wants the finest
  // level, any other the coarsest.
  const double pi = 3.14159265358979323846, theta = 2 * pi * static_cast<double>(step) / 64.0, r = 0.2;
  const double c[3] = {0.5 + 0.25 * std::cos(theta), 0.5 + 0.25 * std::sin(theta), 0.5 + 0.15 * std::sin(theta)};
  const double side = 1.0 / (m_p.nroot << k.level), lo[3] = {k.i * side, k.j * side, k.k * side};
  double d2 = 0;
  for (int a = 0; a < 3; ++a) {
    const double d = std::max({lo[a] - c[a], 0.0, c[a] - lo[a] - side});
    d2 += d * d;
  }
  return d2 < r * r ? m_p.max_level : 0;
}

void Mesh::set_leaves(std::vector<std::int64_t> leaves) {
  std::sort(leaves.begin(), leaves.end());
  m_leaves = std::move(leaves);
  m_blocks.clear();
  for (std::int64_t g = first(m_rank, m_leaves.size()); g < first(m_rank + 1, m_leaves.size()); ++g)
    m_blocks.push_back(Block{m_leaves[g], key_of(m_leaves[g]), allocate()});
}

void Mesh::init() {
  std::vector<std::int64_t> leaves;
  for (int i = 0; i < m_p.nroot; ++i)
    for (int j = 0; j < m_p.nroot; ++j)
      for (int k = 0; k < m_p.nroot; ++k) leaves.push_back(id_of({0, i, j, k}));
  for (int pass = 0; pass < m_p.max_level; ++pass) {  // refine around the sphere of step 0
    std::vector<std::int64_t> next;
    for (std::int64_t id : leaves) {
      const Key k = key_of(id);
      if (want(k, 0) > k.level)
        for (int c = 0; c < 8; ++c) next.push_back(id_of(child(k, c)));
      else
        next.push_back(id);
    }
    leaves = next;
  }
  set_leaves(leaves);
  const int n = m_p.cells;
  for (Block& b : m_blocks) {
    const double h = 1.0 / (m_p.nroot << b.key.level) / n;
    for (int v = 0; v < m_p.nvars; ++v)
      for (int x = 0; x < n; ++x)
        for (int y = 0; y < n; ++y)
          for (int z = 0; z < n; ++z) {
            const double px = (b.key.i * n + x + 0.5) * h, py = (b.key.j * n + y + 0.5) * h,
                         pz = (b.key.k * n + z + 0.5) * h;
            b.u[((static_cast<std::size_t>(v) * m_m + x + 1) * m_m + y + 1) * m_m + z + 1] =
                1.0 + v + std::sin(6.0 * px) * std::cos(4.0 * py + v) + pz * pz;
          }
  }
}

void Mesh::advance(std::int64_t step) {
  const int n = m_p.cells, m = m_m;
  std::vector<double> next(static_cast<std::size_t>(m_p.nvars) * n * n * n);
  auto at = [m](int v, int x, int y, int z) { return ((static_cast<std::size_t>(v) * m + x) * m + y) * m + z; };
  for (Block& b : m_blocks) {
    double* u = b.u.get();
    // Ghosts: the nearest interior cell (zero gradient at every block face). A proxy: no neighbours.
    for (int v = 0; v < m_p.nvars; ++v)
      for (int x = 0; x < m; ++x)
        for (int y = 0; y < m; ++y)
          for (int z = 0; z < m; ++z)
            if (x == 0 || y == 0 || z == 0 || x == m - 1 || y == m - 1 || z == m - 1)
              u[at(v, x, y, z)] = u[at(v, std::clamp(x, 1, n), std::clamp(y, 1, n), std::clamp(z, 1, n))];
    const double h = 1.0 / (m_p.nroot << b.key.level) / n;
    std::size_t o = 0;
    for (int v = 0; v < m_p.nvars; ++v)
      for (int x = 1; x <= n; ++x)
        for (int y = 1; y <= n; ++y)
          for (int z = 1; z <= n; ++z) {
            const double sum = u[at(v, x, y, z)] + u[at(v, x - 1, y, z)] + u[at(v, x + 1, y, z)] +
                               u[at(v, x, y - 1, z)] + u[at(v, x, y + 1, z)] + u[at(v, x, y, z - 1)] +
                               u[at(v, x, y, z + 1)];
            const double px = (b.key.i * n + x - 0.5) * h, py = (b.key.j * n + y - 0.5) * h;
            next[o++] = sum / 7.0 + 1e-3 * std::sin(px * (v + 1) + 2.0 * py + 0.05 * static_cast<double>(step));
          }
    o = 0;
    for (int v = 0; v < m_p.nvars; ++v)
      for (int x = 1; x <= n; ++x)
        for (int y = 1; y <= n; ++y)
          for (int z = 1; z <= n; ++z) u[at(v, x, y, z)] = next[o++];
  }
}

bool Mesh::regrid(std::int64_t step) {
  // The new mesh, the same on every rank: each new block comes from an old one (kept), its parent
  // (refined: from octant `c`) or its eight children (coarsened), named by old leaf indices.
  struct From {
    int kind;  // 0 kept, 1 refined, 2 coarsened
    std::array<std::int64_t, 8> old;
    int c;
  };
  const std::vector<std::int64_t>& old = m_leaves;
  auto index_of = [&](std::int64_t id) -> std::int64_t {
    auto it = std::lower_bound(old.begin(), old.end(), id);
    return it != old.end() && *it == id ? it - old.begin() : -1;
  };
  std::map<std::int64_t, From> next;
  for (std::size_t o = 0; o < old.size(); ++o) {
    const Key k = key_of(old[o]);
    const int w = want(k, step);
    if (w > k.level) {
      for (int c = 0; c < 8; ++c) next[id_of(child(k, c))] = From{1, {static_cast<std::int64_t>(o)}, c};
      continue;
    }
    if (w < k.level) {  // the family goes when all eight are leaves that want to
      const Key p{k.level - 1, k.i / 2, k.j / 2, k.k / 2};
      From f{2, {}, 0};
      bool all = true;
      for (int c = 0; c < 8 && all; ++c) {
        f.old[c] = index_of(id_of(child(p, c)));
        all = f.old[c] >= 0 && want(child(p, c), step) < k.level;
      }
      if (all) {
        next[id_of(p)] = f;
        continue;
      }
    }
    next[old[o]] = From{0, {static_cast<std::int64_t>(o)}, 0};
  }
  std::vector<std::int64_t> leaves;
  for (const auto& e : next) leaves.push_back(e.first);
  if (leaves == old) return false;

  // Old blocks travel (interiors only) from their old owners to the new owners of what they become.
  const std::size_t n_old = old.size(), n_new = leaves.size();
  const std::int64_t my_old = first(m_rank, n_old);
  std::vector<std::set<std::int64_t>> send(m_size), recv(m_size);
  std::int64_t g = 0;
  for (const auto& e : next) {
    const int q = owner(g++, n_new);
    for (int s = 0; s < (e.second.kind == 2 ? 8 : 1); ++s) {
      const std::int64_t o = e.second.old[s];
      const int p = owner(o, n_old);
      if (p == m_rank && q != m_rank) send[q].insert(o);
      if (q == m_rank && p != m_rank) recv[p].insert(o);
    }
  }
  const int n = m_p.cells, per = m_p.nvars * n * n * n;
  std::vector<int> scount(m_size), sdisp(m_size), rcount(m_size), rdisp(m_size);
  for (int r = 0; r < m_size; ++r) {
    scount[r] = static_cast<int>(send[r].size()) * per, rcount[r] = static_cast<int>(recv[r].size()) * per;
    if (r > 0) sdisp[r] = sdisp[r - 1] + scount[r - 1], rdisp[r] = rdisp[r - 1] + rcount[r - 1];
  }
  std::vector<double> out(static_cast<std::size_t>(sdisp.back() + scount.back()));
  std::vector<double> in(static_cast<std::size_t>(rdisp.back() + rcount.back()));
  std::size_t w = 0;
  for (int r = 0; r < m_size; ++r)
    for (std::int64_t o : send[r]) {
      const View src{m_blocks[o - my_old].u.get(), n, 1};
      for (int v = 0; v < m_p.nvars; ++v)
        for (int x = 0; x < n; ++x)
          for (int y = 0; y < n; ++y)
            for (int z = 0; z < n; ++z) out[w++] = src(v, x, y, z);
    }
  check_mpi(MPI_Alltoallv(out.data(), scount.data(), sdisp.data(), MPI_DOUBLE, in.data(), rcount.data(), rdisp.data(),
                          MPI_DOUBLE, m_comm),
            "alltoallv blocks");
  std::map<std::int64_t, View> arrived;
  for (int r = 0; r < m_size; ++r) {
    std::size_t at = static_cast<std::size_t>(rdisp[r]);
    for (std::int64_t o : recv[r]) arrived.emplace(o, View{in.data() + at, n, 0}), at += per;
    m_moved_in += static_cast<std::int64_t>(recv[r].size());
  }
  auto view = [&](std::int64_t o) {
    return o >= my_old && o < first(m_rank + 1, n_old) ? View{m_blocks[o - my_old].u.get(), n, 1} : arrived.at(o);
  };

  // This rank's new blocks: kept ones that stayed keep their allocation, the others are built anew.
  std::vector<Block> mine;
  g = 0;
  const std::int64_t lo = first(m_rank, n_new), hi = first(m_rank + 1, n_new);
  for (const auto& e : next) {
    if (g < lo || g >= hi) {
      ++g;
      continue;
    }
    ++g;
    const From& f = e.second;
    Block b{e.first, key_of(e.first), nullptr};
    if (f.kind == 0 && owner(f.old[0], n_old) == m_rank) {
      b.u = std::move(m_blocks[f.old[0] - my_old].u);
      mine.push_back(std::move(b));
      continue;
    }
    b.u = allocate();
    const int h = n / 2;
    for (int v = 0; v < m_p.nvars; ++v)
      for (int x = 0; x < n; ++x)
        for (int y = 0; y < n; ++y)
          for (int z = 0; z < n; ++z) {
            double value;
            if (f.kind == 0) {
              value = view(f.old[0])(v, x, y, z);
            } else if (f.kind == 1) {  // the parent's cell that covers this one
              value = view(f.old[0])(v, (f.c & 1) * h + x / 2, ((f.c >> 1) & 1) * h + y / 2, (f.c >> 2) * h + z / 2);
            } else {  // the average of the eight child cells it covers
              const View c = view(f.old[(x / h) | (y / h) << 1 | (z / h) << 2]);
              value = 0;
              for (int d = 0; d < 8; ++d)
                value += c(v, 2 * (x % h) + (d & 1), 2 * (y % h) + ((d >> 1) & 1), 2 * (z % h) + (d >> 2));
              value /= 8.0;
            }
            b.u[((static_cast<std::size_t>(v) * m_m + x + 1) * m_m + y + 1) * m_m + z + 1] = value;
          }
    mine.push_back(std::move(b));
  }
  m_blocks = std::move(mine);
  m_leaves = std::move(leaves);
  return true;
}

std::string Mesh::dump(const std::string& path) const {
  const int n = m_p.cells;
  std::vector<std::int64_t> mine;  // (id, hash of the interior) per block
  std::vector<double> interior(static_cast<std::size_t>(m_p.nvars) * n * n * n);
  for (const Block& b : m_blocks) {
    const View u{b.u.get(), n, 1};
    std::size_t o = 0;
    for (int v = 0; v < m_p.nvars; ++v)
      for (int x = 0; x < n; ++x)
        for (int y = 0; y < n; ++y)
          for (int z = 0; z < n; ++z) interior[o++] = u(v, x, y, z);
    mine.push_back(b.id);
    mine.push_back(static_cast<std::int64_t>(fnv1a(interior.data(), interior.size() * sizeof(double))));
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(m_size), displs(m_size);
  check_mpi(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, m_comm), "gather");
  for (int r = 1; r < m_size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<std::int64_t> all(m_rank == 0 ? static_cast<std::size_t>(displs.back() + counts.back()) : 0);
  check_mpi(
      MPI_Gatherv(mine.data(), count, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T, 0, m_comm),
      "gatherv");
  if (m_rank != 0) return "";
  std::string text;  // ranks own increasing id ranges: `all` is in id order
  for (std::size_t b = 0; b < all.size(); b += 2) {
    const Key k = key_of(all[b]);
    char line[128];
    std::snprintf(line, sizeof line, "%" PRId64 " %d %d %d %d %016" PRIx64 "\n", all[b], k.level, k.i, k.j, k.k,
                  static_cast<std::uint64_t>(all[b + 1]));
    text += line;
  }
  if (!path.empty()) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (f != nullptr && std::fclose(f) != 0) ok = false;
    if (!ok) throw std::runtime_error("cannot write " + path);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, fnv1a(text.data(), text.size()));
  return hex;
}

}  // namespace mini_amr
