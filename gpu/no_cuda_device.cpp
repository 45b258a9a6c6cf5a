// Built when neither CUDA nor HIP is: the GPU device answers "built without a GPU" instead of not
// existing.
#include "gpu/device.hpp"

namespace ckpt::detail {
Result<std::unique_ptr<Device>> make_gpu_device(const DeviceConfig&) {
  return Status(Code::unavailable,
                "ckpt was built without a GPU device (CKPT_ENABLE_CUDA / CKPT_ENABLE_HIP OFF or no toolkit)");
}
Result<std::unique_ptr<Device>> make_gpu_device() { return make_gpu_device(DeviceConfig{}); }
}  // namespace ckpt::detail
