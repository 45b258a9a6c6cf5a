// The node level's way out of a full disk (internal): a transport wrapping the node level's posix
// transport that, when a write or the open fails with ENOSPC or EDQUOT, writes that rank's file into
// the staging directory of `dir` instead (what was written locally is copied over first). The commit
// thread then commits the whole checkpoint in `dir` (Committer, Drainer::commit_spilled). See
// docs/design.md, "Levels".
#ifndef CKPT_RUNTIME_LEVELS_SPILL_HPP
#define CKPT_RUNTIME_LEVELS_SPILL_HPP

#include <memory>
#include <string>

#include "base/store.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

/// Whether `s` (from a write or an open) says the file system is full (ENOSPC, EDQUOT).
bool is_out_of_space(const Status& s);

/// Writes through `local` into the node directory; a writer whose write or open finds the node's
/// disk full continues in global.staging_dir(step) with `global` (a posix transport), its placement
/// marked `spilled`. Both transports and the store must outlive it.
std::unique_ptr<Transport> make_spill_transport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> global,
                                                const Store& global_store);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LEVELS_SPILL_HPP
