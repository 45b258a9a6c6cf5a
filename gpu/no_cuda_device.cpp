// Built when CUDA is off: the CUDA device answers "built without CUDA" instead of not existing.
#include "gpu/device.hpp"

namespace ckpt::detail {
Result<std::unique_ptr<Device>> make_cuda_device() {
  return Status(Code::unavailable, "ckpt was built without CUDA (CKPT_ENABLE_CUDA=OFF or no toolkit)");
}
}  // namespace ckpt::detail
