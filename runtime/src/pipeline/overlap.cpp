// check_disjoint_blocks: a sweep along dimension 0 over the blocks of each global variable.
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

}  // namespace ckpt::detail
