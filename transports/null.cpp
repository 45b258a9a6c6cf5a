// The null transport: throws the data away (the NO-I/O baseline of the papers). The whole pipeline
// still runs - capture, flush thread, checksums, agreement - only nothing reaches the disk, so a
// checkpoint written with it is never visible to latest().
#include "transports/transport.hpp"

namespace ckpt::detail {
namespace {

class NullWriter final : public Writer {
 public:
  explicit NullWriter(int rank) : m_rank(rank) {}
  Status write(std::uint64_t, const void*, std::size_t) override { return Status::OK(); }
  Result<Placement> finish(const std::vector<BlockDigest>&) override { return Placement{"null", m_rank, 0, 0}; }
  void abort() override {}

 private:
  int m_rank;
};

class NullTransport final : public Transport {
 public:
  const char* name() const override { return "null"; }
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    return std::unique_ptr<Writer>(std::make_unique<NullWriter>(ctx.rank));
  }
  bool persistent() const override { return false; }
};

}  // namespace

Result<std::unique_ptr<Transport>> make_null_transport(const TransportConfig&, const TransportEnv&) {
  return std::unique_ptr<Transport>(std::make_unique<NullTransport>());
}

}  // namespace ckpt::detail
