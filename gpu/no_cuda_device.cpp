// Built when CUDA is off: the CUDA device answers "built without CUDA" instead of not existing.
#include "gpu/device.hpp"

namespace ckpt::detail {
Result<std::unique_ptr<Device>> make_cuda_device(const CudaDeviceConfig&) {
  return Status(Code::unavailable, "ckpt was built without CUDA (CKPT_ENABLE_CUDA=OFF or no toolkit)");
}
Result<std::unique_ptr<Device>> make_cuda_device() { return make_cuda_device(CudaDeviceConfig{}); }
}  // namespace ckpt::detail
