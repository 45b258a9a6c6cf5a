// Node level -> `dir` when the node's disk is full. See spill.hpp.
#include "runtime/src/levels/spill.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/posix_io.hpp"

namespace ckpt::detail {
namespace {

class SpillWriter final : public Writer {
 public:
  SpillWriter(const WriteContext& ctx, std::unique_ptr<Writer> local, Transport& global, const Store& store)
      : m_ctx(ctx), m_local(std::move(local)), m_global_transport(global), m_store(store) {}

  Status start() override { return m_local ? m_local->start() : m_global->start(); }

  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    if (m_global) return m_global->write(offset, data, n);
    Status s = m_local->write(offset, data, n);
    if (s.ok() || !is_out_of_space(s)) return s;
    // The node's disk is full: the file continues in `dir`, starting with what the node holds.
    CKPT_RETURN_IF_ERROR(spill(s));
    return m_global->write(offset, data, n);
  }

  Result<Placement> finish(const std::vector<BlockDigest>& digests) override {
    if (!m_global) return m_local->finish(digests);
    auto p = m_global->finish(digests);
    if (p.ok()) p.value().spilled = true;
    return p;
  }

  void abort() override {
    if (m_local) m_local->abort();
    if (m_global) m_global->abort();
  }

  /// Opens the writer in `dir`'s staging directory, copies the bytes written locally (the file's
  /// header and the stream up to the write that failed) into it and drops the local file.
  Status spill(const Status& why) {
    WriteContext g = m_ctx;
    g.dir = m_store.staging_dir(m_ctx.step);
    CKPT_RETURN_IF_ERROR(make_dirs(g.dir).with_context(why.message()));
    auto w = m_global_transport.open(g);
    if (!w.ok()) return w.status().with_context("node disk full (" + why.message() + "), writing to " + g.dir);
    m_global = std::move(w).value();
    if (m_local) {
      // Same transport, same name: the local file's bytes are the global file's prefix. A partly
      // written last window is rewritten by the caller.
      const std::string name = m_ctx.file_name("data", m_ctx.rank);
      Status s = copy_file(m_ctx.dir + "/" + name, g.dir + "/" + name, false, false);  // finish() syncs
      m_local->abort();                                                                // frees the node's space
      m_local.reset();
      CKPT_RETURN_IF_ERROR(s.with_context("node disk full, copying to " + g.dir));
    }
    return Status::OK();
  }

 private:
  WriteContext m_ctx;
  std::unique_ptr<Writer> m_local, m_global;
  Transport& m_global_transport;
  const Store& m_store;
};

class SpillTransport final : public Transport {
 public:
  SpillTransport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> global, const Store& store)
      : m_local(std::move(local)), m_global(std::move(global)), m_store(store) {}
  const char* name() const override { return m_local->name(); }
  bool collective_open() const override { return m_local->collective_open(); }
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    auto w = m_local->open(ctx);
    if (w.ok()) return std::unique_ptr<Writer>(new SpillWriter(ctx, std::move(w).value(), *m_global, m_store));
    if (!is_out_of_space(w.status())) return w.status();
    auto sw = std::make_unique<SpillWriter>(ctx, nullptr, *m_global, m_store);
    CKPT_RETURN_IF_ERROR(sw->spill(w.status()));
    return std::unique_ptr<Writer>(std::move(sw));
  }

 private:
  std::unique_ptr<Transport> m_local, m_global;
  const Store& m_store;
};

}  // namespace

bool is_out_of_space(const Status& s) {
  if (s.ok() || s.code() != Code::io_error) return false;
  const std::string& m = s.message();
  return m.find(std::strerror(ENOSPC)) != std::string::npos || m.find(std::strerror(EDQUOT)) != std::string::npos;
}

std::unique_ptr<Transport> make_spill_transport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> global,
                                                const Store& global_store) {
  return std::make_unique<SpillTransport>(std::move(local), std::move(global), global_store);
}

}  // namespace ckpt::detail
