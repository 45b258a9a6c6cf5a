// libFuzzer target: the data-file header decoder (decode_data_header), also round-tripped.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto h = ckpt::detail::decode_data_header(data, size);
  if (!h.ok()) return 0;
  auto bytes = ckpt::detail::encode_data_header(h.value());
  auto again = ckpt::detail::decode_data_header(bytes.data(), bytes.size());
  if (!again.ok() || again->step != h->step || again->ckpt_id != h->ckpt_id || again->data_offset != h->data_offset)
    std::abort();
  return 0;
}
