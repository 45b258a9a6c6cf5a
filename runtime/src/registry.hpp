// The region registry (internal): what the application protected, by name, in registration order.
#ifndef CKPT_RUNTIME_REGISTRY_HPP
#define CKPT_RUNTIME_REGISTRY_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/layout.hpp"
#include "ckpt/options.hpp"
#include "gpu/device.hpp"

namespace ckpt::detail {

/// The protected regions. Application thread only (a checkpoint takes a snapshot of regions()).
class Registry {
 public:
  /// `device` classifies pointers (host or device memory); `groups` assign regions to transport groups.
  /// `alignment` is the options' block alignment (for stream_bound()).
  Registry(const Device& device, std::vector<Options::Group> groups, std::uint64_t alignment)
      : m_device(device), m_groups(std::move(groups)), m_alignment(alignment) {}

  Status protect(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                 Shape count);
  Status update(const std::string& name, void* ptr, RegionKind kind, Shape global, Shape start, Shape count);
  Status unprotect(const std::string& name);
  Status annotate(const std::string& name, const std::string& key, const std::string& value);
  /// Every region, in registration order.
  const std::vector<Region>& regions() const { return m_regions; }
  /// Upper bound of the regions' stream (payload + padding), kept up to date in O(1) per call: the
  /// staging pool is reserved from it outside checkpoint().
  std::uint64_t stream_bound() const { return m_stream_bound; }

 private:
  Status locate(Region& r, const char* what) const;
  Region* find(const std::string& name);
  std::uint64_t bound(const Region& r) const;

  const Device& m_device;
  std::vector<Options::Group> m_groups;
  std::uint64_t m_alignment;
  std::uint64_t m_stream_bound = 0;
  std::vector<Region> m_regions;
  std::unordered_map<std::string, std::size_t> m_region_at;  ///< name -> position in m_regions
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_REGISTRY_HPP
