// check_disjoint_blocks: a sweep along dimension 0 over the blocks of each global variable;
// merge_adjacent_boxes: a sort per dimension that joins the boxes meeting face to face.
#include "runtime/src/pipeline/overlap.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace ckpt::detail {

namespace {
std::string box_text(const BlockRecord& b) {
  std::string t = "[";
  for (std::size_t d = 0; d < b.start.size(); ++d)
    t += (d ? ", " : "") + std::to_string(b.start[d]) + ":" + std::to_string(b.start[d] + b.count[d]);
  return t + ")";
}

bool overlap_beyond_dim0(const BlockRecord& a, const BlockRecord& b) {
  for (std::size_t d = 1; d < a.start.size(); ++d)
    if (a.start[d] >= b.start[d] + b.count[d] || b.start[d] >= a.start[d] + a.count[d]) return false;
  return true;
}
}  // namespace

Status check_disjoint_blocks(const Index& idx) {
  std::vector<std::vector<const BlockRecord*>> by_var(idx.vars.size());
  for (const BlockRecord& b : idx.blocks) {
    if (b.var >= idx.vars.size() || idx.vars[b.var].kind != RegionKind::global || b.count.empty()) continue;
    if (std::find(b.count.begin(), b.count.end(), 0u) != b.count.end()) continue;  // an empty box
    by_var[b.var].push_back(&b);
  }
  std::vector<const BlockRecord*> active;
  for (std::size_t v = 0; v < by_var.size(); ++v) {
    auto& blocks = by_var[v];
    if (blocks.size() < 2) continue;
    std::sort(blocks.begin(), blocks.end(),
              [](const BlockRecord* a, const BlockRecord* b) { return a->start[0] < b->start[0]; });
    active.clear();
    for (const BlockRecord* b : blocks) {
      // Blocks that end at or before this one's start in dimension 0 can overlap no later block.
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [&](const BlockRecord* a) { return a->start[0] + a->count[0] <= b->start[0]; }),
                   active.end());
      for (const BlockRecord* a : active)
        if (overlap_beyond_dim0(*a, *b))
          return Status(Code::invalid_argument,
                        "global array '" + idx.vars[v].name + "': the boxes of rank " + std::to_string(a->rank) + " " +
                            box_text(*a) + " and rank " + std::to_string(b->rank) + " " + box_text(*b) +
                            " overlap, so it could not be restored; a Block must not include ghost cells "
                            "(register the owned interior - set_memory_selection says where it lies in a ghosted "
                            "allocation - or the whole local array as a local array)");
      active.push_back(b);
    }
  }
  return Status::OK();
}

void merge_adjacent_boxes(std::vector<BlockRecord>& boxes) {
  const auto empty = [](const BlockRecord& b) {
    return b.count.empty() || std::find(b.count.begin(), b.count.end(), 0u) != b.count.end();
  };
  std::size_t max_dims = 0;
  for (const BlockRecord& b : boxes) max_dims = std::max(max_dims, b.count.size());
  std::vector<bool> gone(boxes.size(), false);
  std::vector<std::size_t> order;
  for (bool merged = true; merged;) {
    merged = false;
    for (std::size_t d = 0; d < max_dims; ++d) {
      // Boxes of a variable that agree outside dimension d, side by side, in the order of their starts in d.
      const auto key = [&](const BlockRecord& b) {
        std::vector<std::uint64_t> k{b.var, b.count.size()};
        for (std::size_t e = 0; e < b.count.size(); ++e)
          if (e != d) k.insert(k.end(), {b.start[e], b.count[e]});
        k.push_back(b.start[d]);
        return k;
      };
      order.clear();
      std::vector<std::vector<std::uint64_t>> keys(boxes.size());
      for (std::size_t i = 0; i < boxes.size(); ++i)
        if (!gone[i] && boxes[i].count.size() > d && !empty(boxes[i])) {
          keys[i] = key(boxes[i]);
          order.push_back(i);
        }
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
      std::size_t run = 0;  // the box the next one may join, in `order`
      for (std::size_t j = 1; j < order.size(); ++j) {
        BlockRecord& a = boxes[order[run]];
        const BlockRecord& b = boxes[order[j]];
        const bool same_sides = std::equal(keys[order[run]].begin(), keys[order[run]].end() - 1, keys[order[j]].begin(),
                                           keys[order[j]].end() - 1) &&
                                keys[order[run]].size() == keys[order[j]].size();
        std::uint64_t end = 0, b_end = 0, grown = 0;
        if (same_sides && !__builtin_add_overflow(a.start[d], a.count[d], &end) && end == b.start[d] &&
            !__builtin_add_overflow(b.start[d], b.count[d], &b_end) &&
            !__builtin_add_overflow(a.count[d], b.count[d], &grown)) {
          a.count[d] = grown;
          a.rank = std::min(a.rank, b.rank);
          gone[order[j]] = true;
          merged = true;
        } else {
          run = j;
        }
      }
    }
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < boxes.size(); ++i)
    if (!gone[i]) {
      if (kept != i) boxes[kept] = std::move(boxes[i]);
      ++kept;
    }
  boxes.resize(kept);
}

}  // namespace ckpt::detail
