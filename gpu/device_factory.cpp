// The Runtime's device factory and its test seam. Compiled into libckpt only (not into ckpt_gpu),
// and exported: a test that links the device layer's objects for its internals still installs its
// fake device in the one factory the Runtime reads.
#include "gpu/device.hpp"

namespace ckpt::detail {

namespace {
DeviceFactory& factory() {
  static DeviceFactory f;
  return f;
}
}  // namespace

void set_device_factory(DeviceFactory f) { factory() = std::move(f); }

Result<std::unique_ptr<Device>> make_runtime_device(const DeviceConfig& config) {
  if (factory()) return factory()(config);
  return make_default_device(config);
}

}  // namespace ckpt::detail
