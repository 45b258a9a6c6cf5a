// The region registry (internal): what the application protected, by name, in registration order.
#ifndef CKPT_RUNTIME_REGISTRY_HPP
#define CKPT_RUNTIME_REGISTRY_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "base/layout.hpp"
#include "ckpt/options.hpp"
#include "gpu/device.hpp"

namespace ckpt::detail {

/// Which of protect(), update() and protect_or_update() a registration is.
enum class Upsert { protect, update, either };

/// The protected regions. Application thread only (a checkpoint takes a snapshot of regions()).
class Registry {
 public:
  /// `device` classifies pointers (host or device memory); `groups` assign regions to transport groups.
  /// `alignment` is the options' block alignment (for stream_bound()).
  /// `check` is the constraint of the region's transport group (Transport::check_region), asked at
  /// every protect, update and Source location.
  Registry(const Device& device, std::vector<Options::Group> groups, std::uint64_t alignment,
           std::function<Status(const Region&)> check)
      : m_device(device), m_groups(std::move(groups)), m_alignment(alignment), m_check(std::move(check)) {}

  Status protect(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                 Shape count);
  Status update(const std::string& name, void* ptr, RegionKind kind, Shape global, Shape start, Shape count);
  /// Registers a region found through `source` (local or joined kind); asks locate() once to check it.
  Status protect(const std::string& name, DType dtype, RegionKind kind, std::shared_ptr<const Source> source);
  /// protect() when `name` is new, else update() after checking that the dtype is the same.
  Status protect_or_update(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                           Shape count);
  /// A scattered joined region (Runtime's Scattered): rows of extents `row` in `pieces`; `start` and
  /// `alloc` a row's memory selection (both empty: packed). `dtype` is checked, except by update.
  Status set_scattered(const std::string& name, DType dtype, std::vector<PieceRef> pieces, const Shape& row,
                       const Shape& start, const Shape& alloc, Upsert mode);
  Status set_optional(const std::string& name, bool optional);
  /// Runtime::set_memory_selection: `start` and `alloc` both empty pack the region again.
  Status set_memory_selection(const std::string& name, Shape start, Shape alloc);
  /// Runtime::set_restart_rows / set_restart_keys (null: clear_restart_rows).
  Status set_restart_rows(const std::string& name, std::shared_ptr<const RestartRows> rows);
  /// Asks every Source-registered region where it is now (checkpoint() and restart() do, before they
  /// read or fill the regions). The first failure, naming the region.
  Status locate_sources();
  /// restart(): for every Source-registered region with a resize and extents `wanted` gives for it,
  /// calls resize with them, then locates the region again.
  Status fit_sources(const std::function<std::optional<Shape>(const Region&)>& wanted);
  Status unprotect(const std::string& name);
  Status annotate(const std::string& name, const std::string& key, const std::string& value);
  /// Every region, in registration order.
  const std::vector<Region>& regions() const { return m_regions; }
  /// Upper bound of the regions' stream (payload + padding), kept up to date in O(1) per call: the
  /// staging pool is reserved from it outside checkpoint().
  std::uint64_t stream_bound() const { return m_stream_bound; }

 private:
  Status locate(Region& r, const char* what) const;
  Status locate_pieces(Region& r, const char* what) const;
  /// Points `r` at what its source's locate() returns now and checks the extents; keeps the stream
  /// bound when `r` is registered.
  Status relocate(Region& r, bool registered = true);
  /// Appends a checked region.
  Status add(Region r);
  /// The transport group of a region called `name` (0: the default transport).
  std::uint32_t group_of(const std::string& name) const;
  Region* find(const std::string& name);
  std::uint64_t bound(const Region& r) const;

  const Device& m_device;
  std::vector<Options::Group> m_groups;
  std::uint64_t m_alignment;
  std::function<Status(const Region&)> m_check;
  std::uint64_t m_stream_bound = 0;
  std::vector<Region> m_regions;
  std::unordered_map<std::string, std::size_t> m_region_at;  ///< name -> position in m_regions
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_REGISTRY_HPP
