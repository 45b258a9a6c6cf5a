/// \file kokkos.hpp
/// Opt-in, header-only adapter that registers a Kokkos::View with a ckpt::Runtime. The only ckpt header
/// that includes Kokkos; include it only in code that already uses Kokkos.
///
///     Kokkos::View<double**> u("u", nx, ny);
///     ckpt::protect(rt, "u", u);                      // this rank's array
///     ckpt::protect(rt, "rho", rho, block);           // this rank's box of a global array
///     ckpt::update(rt, "walkers", walkers);           // after a resize or reallocation
///     ckpt::track(rt, "u", u);                        // or: follows u through Kokkos::resize, no update()
///     ckpt::track_rows(rt, "atoms", atoms);           // this rank's rows of a joined array, followed
///
/// What comes from the View's type:
///   - dtype: arithmetic value types map to their DType; Kokkos::complex<float|double> to f32|f64 with
///     a trailing dimension of 2; any other trivially copyable type to DType::bytes with a trailing
///     dimension of sizeof(T).
///   - extents: the View's extents, rank 0 (a single value) to 8.
///   - memory space: host-accessible spaces (HostSpace, CudaHostPinnedSpace, HIPHostPinnedSpace, ...)
///     and, when Kokkos has CUDA, CudaSpace and CudaUVMSpace, when it has HIP, HIPSpace and
///     HIPManagedSpace. The Runtime detects the memory kind from the pointer; the adapter rejects GPU
///     spaces of a vendor ckpt itself was built without (the HIP spaces have not run on an AMD GPU).
///   - layout: LayoutRight is ckpt's row-major order and maps directly. A LayoutLeft View of extents
///     (n0, ..., nk) has exactly the bytes of a row-major array of extents (nk, ..., n0): it is
///     registered with the extents (and a Block's global/start/count) reversed, and the region gets
///     the attribute layout=left. A LayoutStride View is accepted when it is contiguous in right or left
///     order, and when it is a box of a larger row-major (or column-major) allocation - the interior of
///     a View with ghost cells, `Kokkos::subview(u, pair(g, nx + g), pair(g, ny + g))`, or a padded
///     allocation: it is registered with a memory selection (Runtime::set_memory_selection), so only
///     the box is stored and restart writes only the box. Other strided Views (every other element,
///     a column of a row-major matrix) are an invalid_argument error.
///   - Restart into a View of the same layout: a LayoutLeft View restarted from a LayoutRight
///     checkpoint of a shape that is equal under reversal (e.g. n x n) would load transposed; the
///     layout attribute is there so that tools (and you) can tell.
///
/// Stream semantics are those of Runtime::checkpoint and Runtime::restart(step, stream): pass the
/// stream of the execution space instance whose kernels write the Views, e.g.
/// `rt.checkpoint(step, Kokkos::DefaultExecutionSpace().cuda_stream())` and
/// `rt.restart(step, exec.cuda_stream())`. Always pass it: Kokkos 4's default Cuda instance runs on a
/// stream of its own, not on the legacy default stream, so checkpoint(step) without a stream is NOT
/// ordered after its kernels (Kokkos 3 used the legacy default stream; do not rely on it). With HIP
/// the same holds with `exec.hip_stream()`.
#ifndef CKPT_RUNTIME_KOKKOS_HPP
#define CKPT_RUNTIME_KOKKOS_HPP

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"

namespace ckpt {
namespace detail::kokkos {

template <class T>
struct ComplexParts {
  static constexpr std::size_t real_size = 0;  ///< sizeof the real part; 0: not a Kokkos::complex
};
template <class R>
struct ComplexParts<Kokkos::complex<R>> {
  using real = R;
  static constexpr std::size_t real_size = std::is_floating_point<R>::value ? sizeof(R) : 0;
};

/// DType of one element and the extent of the trailing dimension it adds (0: none).
template <class T>
constexpr std::pair<DType, std::uint64_t> element_type() {
  if constexpr (std::is_arithmetic<T>::value && (std::is_integral<T>::value || sizeof(T) == 4 || sizeof(T) == 8)) {
    return {dtype_of<T>(), 0};
  } else if constexpr (ComplexParts<T>::real_size == 4 || ComplexParts<T>::real_size == 8) {
    return {dtype_of<typename ComplexParts<T>::real>(), 2};
  } else {
    static_assert(std::is_trivially_copyable<T>::value,
                  "ckpt::protect: the View's value type must be trivially copyable");
    return {DType::bytes, sizeof(T)};
  }
}

/// Which vendor's GPU device MemorySpace needs (it orders the copies after the kernels on the stream): CudaSpace /
/// CudaUVMSpace with Kokkos' CUDA back end, HIPSpace / HIPManagedSpace with its HIP back end (Kokkos::Experimental::
/// before Kokkos 4.0, HIPManagedSpace from 3.7 on). Host-accessible spaces (HostSpace, CudaHostPinnedSpace,
/// HIPHostPinnedSpace, ...) are not: they are copied on the host.
enum class GpuSpace { none, cuda, hip };

template <class MemorySpace>
constexpr GpuSpace gpu_space() {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<MemorySpace, Kokkos::CudaSpace>::value ||
                std::is_same<MemorySpace, Kokkos::CudaUVMSpace>::value)
    return GpuSpace::cuda;
#endif
#if defined(KOKKOS_ENABLE_HIP)
#if KOKKOS_VERSION >= 40000
  namespace KH = Kokkos;
#else
  namespace KH = Kokkos::Experimental;
#endif
  if constexpr (std::is_same<MemorySpace, KH::HIPSpace>::value) return GpuSpace::hip;
#if KOKKOS_VERSION >= 30700
  if constexpr (std::is_same<MemorySpace, KH::HIPManagedSpace>::value) return GpuSpace::hip;
#endif
#endif
  return GpuSpace::none;
}

/// Can ckpt read and restore a View in MemorySpace? GPU spaces need ckpt's device of the same vendor;
/// host-accessible spaces are copied on the host.
template <class MemorySpace>
Status check_memory_space(const std::string& name) {
  constexpr GpuSpace gpu = gpu_space<MemorySpace>();
  if constexpr (gpu != GpuSpace::none) {
    constexpr bool built = gpu == GpuSpace::cuda ? CKPT_HAVE_CUDA != 0 : CKPT_HAVE_HIP != 0;
    const std::string vendor = gpu == GpuSpace::cuda ? "CUDA" : "HIP";
    if (built) return Status::OK();
    return Status(Code::unavailable,
                  "region '" + name + "': the View lives in Kokkos::" + std::string(MemorySpace::name()) +
                      " but ckpt was built without " + vendor + " (CKPT_ENABLE_" + vendor + "=OFF or no toolkit)");
  } else if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible) {
    return Status::OK();  // HostSpace, CudaHostPinnedSpace, HIPHostPinnedSpace, HBWSpace, ...
  } else {
    return Status(Code::invalid_argument, "region '" + name + "': memory space " + std::string(MemorySpace::name()) +
                                              " is neither host-accessible nor a CUDA or HIP space ckpt supports");
  }
}

enum class Order { right, left };

/// The extents of the row-major allocation that strided View `v` is a box of (at its data(), start 0),
/// in row-major order (`reversed`: of the View's reversed dimensions, for left order); empty when the
/// strides do not describe one (each stride a multiple of the next inner one, by at least its extent).
template <class ViewType>
Shape box_allocation(const ViewType& v, bool reversed) {
  constexpr std::size_t rank = static_cast<std::size_t>(ViewType::rank);
  Shape ext(rank), stride(rank), alloc;
  for (std::size_t d = 0; d < rank; ++d) {
    const std::size_t k = reversed ? rank - 1 - d : d;
    ext[d] = static_cast<std::uint64_t>(v.extent(k));
    stride[d] = static_cast<std::uint64_t>(v.stride(k));
  }
  if (rank == 0 || stride[rank - 1] != 1) return alloc;
  alloc.assign(rank, 0);
  alloc[0] = ext[0];
  for (std::size_t d = rank - 1; d > 0; --d) {
    if (stride[d] == 0 || stride[d - 1] % stride[d] != 0 || stride[d - 1] / stride[d] < ext[d]) return Shape();
    alloc[d] = stride[d - 1] / stride[d];
  }
  return alloc;
}

/// The View's extents in row-major order (reversed for left order) plus the element's trailing
/// dimension, and whether the View was reversed. A View that is not contiguous but a box of a larger
/// allocation gets that allocation's extents in `alloc` (row-major, with the trailing dimension; empty
/// for a contiguous View); any other View is an error.
template <class ViewType>
Status row_major_shape(const std::string& name, const ViewType& v, Shape& dims, Order& order, Shape& alloc) {
  constexpr std::size_t rank = static_cast<std::size_t>(ViewType::rank);
  static_assert(rank <= 8, "Kokkos Views have at most 8 dimensions");
  using Layout = typename ViewType::array_layout;
  dims.assign(rank, 0);
  alloc.clear();
  for (std::size_t d = 0; d < rank; ++d) dims[d] = static_cast<std::uint64_t>(v.extent(d));
  const bool empty = v.size() == 0;
  if (!empty && !v.span_is_contiguous()) {
    // A box of a larger allocation (ghost cells, padding): stored through a memory selection.
    constexpr std::uint64_t trailing = element_type<typename ViewType::value_type>().second;
    const bool left = std::is_same<Layout, Kokkos::LayoutLeft>::value;
    alloc = box_allocation(v, left);
    order = left ? Order::left : Order::right;
    if (alloc.empty() && !std::is_same<Layout, Kokkos::LayoutRight>::value && !left) {
      alloc = box_allocation(v, true);  // a LayoutStride box of a column-major allocation
      order = Order::left;
    }
    if (alloc.empty())
      return Status(Code::invalid_argument,
                    "region '" + name + "': the Kokkos::View '" + v.label() +
                        "' is not contiguous and not a box of a row- or column-major allocation (a strided "
                        "subview such as every other element or one column of a row-major matrix); checkpoint "
                        "the parent View or deep_copy it into a contiguous View");
    if (order == Order::left) std::reverse(dims.begin(), dims.end());
    if (trailing != 0) {
      dims.push_back(trailing);
      alloc.push_back(trailing);
    }
    return Status::OK();
  }
  if constexpr (std::is_same<Layout, Kokkos::LayoutRight>::value) {
    order = Order::right;
  } else if constexpr (std::is_same<Layout, Kokkos::LayoutLeft>::value) {
    order = Order::left;
  } else {
    // LayoutStride (or another layout): accept contiguous right or left order, judged by the strides.
    // Dimensions of extent 1 may carry any stride.
    bool right = true, left = true;
    std::uint64_t s = 1;
    for (std::size_t d = rank; d-- > 0;) {
      if (dims[d] > 1 && static_cast<std::uint64_t>(v.stride(d)) != s) right = false;
      s *= dims[d];
    }
    s = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      if (dims[d] > 1 && static_cast<std::uint64_t>(v.stride(d)) != s) left = false;
      s *= dims[d];
    }
    if (empty || right)
      order = Order::right;
    else if (left)
      order = Order::left;
    else
      return Status(Code::invalid_argument, "region '" + name + "': the Kokkos::View '" + v.label() +
                                                "' is contiguous but in neither row- nor column-major order");
  }
  if (order == Order::left) std::reverse(dims.begin(), dims.end());
  constexpr std::uint64_t trailing = element_type<typename ViewType::value_type>().second;
  if (trailing != 0) dims.push_back(trailing);
  return Status::OK();
}

/// Turns a Block given in the View's index order into ckpt's row-major Block.
template <class ViewType>
Status row_major_block(const std::string& name, const ViewType& v, const Block& in, Order order, Block& out) {
  constexpr std::size_t rank = static_cast<std::size_t>(ViewType::rank);
  if (in.global.size() != rank || in.start.size() != rank || in.count.size() != rank)
    return Status(Code::invalid_argument,
                  "region '" + name + "': the Block must have " + std::to_string(rank) + " dimensions like the View");
  for (std::size_t d = 0; d < rank; ++d)
    if (in.count[d] != static_cast<std::uint64_t>(v.extent(d)))
      return Status(Code::invalid_argument, "region '" + name + "': Block count[" + std::to_string(d) +
                                                "] = " + std::to_string(in.count[d]) + " but the View's extent(" +
                                                std::to_string(d) + ") = " + std::to_string(v.extent(d)));
  out = in;
  if (order == Order::left) {
    std::reverse(out.global.begin(), out.global.end());
    std::reverse(out.start.begin(), out.start.end());
    std::reverse(out.count.begin(), out.count.end());
  }
  constexpr std::uint64_t trailing = element_type<typename ViewType::value_type>().second;
  if (trailing != 0) {
    out.global.push_back(trailing);
    out.start.push_back(0);
    out.count.push_back(trailing);
  }
  return Status::OK();
}

template <class ViewType>
constexpr void check_view_type() {
  static_assert(Kokkos::is_view<ViewType>::value, "ckpt::protect/update take a Kokkos::View");
  static_assert(!std::is_const<typename ViewType::value_type>::value,
                "ckpt::protect/update need a View of non-const data: restart writes into it");
}

template <class ViewType>
void* data_of(const ViewType& v) {
  return const_cast<void*>(static_cast<const void*>(v.data()));
}

/// Kokkos::resize(v, count...) for a row-major `count` (reversed back for left order, without the
/// element's trailing dimension).
template <class ViewType, std::size_t... I>
void resize_view(ViewType& v, const Shape& count, Order order, std::index_sequence<I...>) {
  Shape dims(count.begin(), count.begin() + sizeof...(I));
  if (order == Order::left) std::reverse(dims.begin(), dims.end());
  Kokkos::resize(v, static_cast<std::size_t>(dims[I])...);
}

/// The Source of a View followed through a reference: its current data and extents at each
/// checkpoint, resized by restart().
template <class ViewType>
Source view_source(const std::string& name, ViewType& view) {
  constexpr std::size_t rank = static_cast<std::size_t>(ViewType::rank);
  Source src;
  src.locate = [name, &view] {
    Shape dims, alloc;
    Order order = Order::right;
    Status s = row_major_shape(name, view, dims, order, alloc);
    if (!s.ok()) throw std::invalid_argument(s.message());
    MemorySelection box;
    if (!alloc.empty()) box = MemorySelection{Dims(Shape(alloc.size(), 0)), Dims(std::move(alloc))};
    return Place{data_of(view), Dims(std::move(dims)), std::move(box)};
  };
  // Kokkos::resize takes no LayoutStride View (a subview): such a View is restored with the extents it has.
  if constexpr (rank > 0 && !std::is_same<typename ViewType::array_layout, Kokkos::LayoutStride>::value) {
    src.resize = [name, &view](const Shape& count) {
      Shape dims, alloc;
      Order order = Order::right;
      CKPT_RETURN_IF_ERROR(row_major_shape(name, view, dims, order, alloc));
      if (count.size() != dims.size())
        return Status(Code::mismatch, "region '" + name + "': the checkpoint holds " + std::to_string(count.size()) +
                                          " dimensions, the View has " + std::to_string(dims.size()));
      resize_view(view, count, order, std::make_index_sequence<rank>());
      return Status::OK();
    };
  }
  return src;
}

/// After protect(): the memory selection of a View that is a box of a larger allocation; a refusal
/// unregisters the region again (nothing stays registered by a failed protect).
inline Status select_box(Runtime& rt, const std::string& name, const Shape& alloc) {
  if (alloc.empty()) return Status::OK();
  Status s = rt.set_memory_selection(name, MemorySelection{Dims(Shape(alloc.size(), 0)), Dims(alloc)});
  if (!s.ok()) (void)rt.unprotect(name);
  return s;
}

/// update() of a View: the region's selection becomes the View's - the View says how its memory is laid
/// out, so a box registered before never outlives it (none for a contiguous View). The selection is
/// cleared first, so that the new extents are checked against the new allocation, not the old one; a
/// refusal of the update then leaves the region packed at its previous pointer and extents.
template <class Apply>
Status update_with_box(Runtime& rt, const std::string& name, const Shape& alloc, Apply&& apply) {
  if (!rt.set_memory_selection(name, MemorySelection{}).ok()) return apply();  // not protected, a Source: it says
  CKPT_RETURN_IF_ERROR(apply());
  if (alloc.empty()) return Status::OK();
  return rt.set_memory_selection(name, MemorySelection{Dims(Shape(alloc.size(), 0)), Dims(alloc)});
}

}  // namespace detail::kokkos

/// Registers `view` so that it cannot go stale: ckpt keeps a reference to the View object (not to its
/// allocation) and reads its current data() and extents at each checkpoint, so Kokkos::resize,
/// Kokkos::realloc or assigning another View to it need no update(). restart() resizes it
/// (Kokkos::resize) to the stored extents before filling it. `view` must outlive the registration
/// (until unprotect() or the Runtime's end). A local array of this rank, like protect(rt, name, view).
template <class ViewType>
Status track(Runtime& rt, const std::string& name, ViewType& view) {
  namespace K = detail::kokkos;
  K::check_view_type<ViewType>();
  CKPT_RETURN_IF_ERROR(K::check_memory_space<typename ViewType::memory_space>(name));
  constexpr DType dt = K::element_type<typename ViewType::value_type>().first;
  CKPT_RETURN_IF_ERROR(rt.protect(name, dt, K::view_source(name, view), SourceKind::local));
  if (std::is_same<typename ViewType::array_layout, Kokkos::LayoutLeft>::value)
    return rt.annotate(name, "layout", "left");
  return Status::OK();
}

/// As track(), for this rank's rows of a joined array (see Joined): a LayoutRight View whose first
/// extent is this rank's row count (particles, atoms). restart() resizes it to this rank's share of
/// the balanced split of the stored rows, on any rank count.
template <class ViewType>
Status track_rows(Runtime& rt, const std::string& name, ViewType& view) {
  namespace K = detail::kokkos;
  K::check_view_type<ViewType>();
  static_assert(static_cast<std::size_t>(ViewType::rank) >= 1, "a joined array needs a View of rank >= 1");
  static_assert(!std::is_same<typename ViewType::array_layout, Kokkos::LayoutLeft>::value,
                "track_rows: rows must be the slowest dimension; use a LayoutRight View");
  CKPT_RETURN_IF_ERROR(K::check_memory_space<typename ViewType::memory_space>(name));
  constexpr DType dt = K::element_type<typename ViewType::value_type>().first;
  return rt.protect(name, dt, K::view_source(name, view), SourceKind::joined);
}

/// Registers `view` (this rank's array) as region `name`; see the file comment for dtype, extents,
/// memory space and layout. The View's allocation must stay alive until unprotect() or update().
template <class ViewType>
Status protect(Runtime& rt, const std::string& name, const ViewType& view) {
  namespace K = detail::kokkos;
  K::check_view_type<ViewType>();
  CKPT_RETURN_IF_ERROR(K::check_memory_space<typename ViewType::memory_space>(name));
  Shape dims, alloc;
  K::Order order = K::Order::right;
  CKPT_RETURN_IF_ERROR(K::row_major_shape(name, view, dims, order, alloc));
  constexpr DType dt = K::element_type<typename ViewType::value_type>().first;
  CKPT_RETURN_IF_ERROR(rt.protect(name, K::data_of(view), dt, std::move(dims)));
  CKPT_RETURN_IF_ERROR(K::select_box(rt, name, alloc));
  if (order == K::Order::left) return rt.annotate(name, "layout", "left");
  return Status::OK();
}

/// Registers `view` as this rank's box of a global array. `block` is given in the View's index order
/// (for a LayoutLeft View too); its count must equal the View's extents. Restartable on other rank
/// counts, provided every rank uses the same layout.
template <class ViewType>
Status protect(Runtime& rt, const std::string& name, const ViewType& view, const Block& block) {
  namespace K = detail::kokkos;
  K::check_view_type<ViewType>();
  static_assert(static_cast<std::size_t>(ViewType::rank) >= 1, "a Block needs a View of rank >= 1");
  CKPT_RETURN_IF_ERROR(K::check_memory_space<typename ViewType::memory_space>(name));
  Shape dims, alloc;
  K::Order order = K::Order::right;
  CKPT_RETURN_IF_ERROR(K::row_major_shape(name, view, dims, order, alloc));
  Block b;
  CKPT_RETURN_IF_ERROR(K::row_major_block(name, view, block, order, b));
  constexpr DType dt = K::element_type<typename ViewType::value_type>().first;
  CKPT_RETURN_IF_ERROR(rt.protect(name, K::data_of(view), dt, b));
  CKPT_RETURN_IF_ERROR(K::select_box(rt, name, alloc));
  if (order == K::Order::left) return rt.annotate(name, "layout", "left");
  return Status::OK();
}

/// Points region `name` at `view` (new allocation or extents). The value type must give the same
/// dtype, and the layout should be the one the region was protected with.
template <class ViewType>
Status update(Runtime& rt, const std::string& name, const ViewType& view) {
  namespace K = detail::kokkos;
  K::check_view_type<ViewType>();
  CKPT_RETURN_IF_ERROR(K::check_memory_space<typename ViewType::memory_space>(name));
  Shape dims, alloc;
  K::Order order = K::Order::right;
  CKPT_RETURN_IF_ERROR(K::row_major_shape(name, view, dims, order, alloc));
  return K::update_with_box(rt, name, alloc, [&] { return rt.update(name, K::data_of(view), Dims(dims)); });
}

/// Block form of update(); `block` in the View's index order as for protect().
template <class ViewType>
Status update(Runtime& rt, const std::string& name, const ViewType& view, const Block& block) {
  namespace K = detail::kokkos;
  K::check_view_type<ViewType>();
  static_assert(static_cast<std::size_t>(ViewType::rank) >= 1, "a Block needs a View of rank >= 1");
  CKPT_RETURN_IF_ERROR(K::check_memory_space<typename ViewType::memory_space>(name));
  Shape dims, alloc;
  K::Order order = K::Order::right;
  CKPT_RETURN_IF_ERROR(K::row_major_shape(name, view, dims, order, alloc));
  Block b;
  CKPT_RETURN_IF_ERROR(K::row_major_block(name, view, block, order, b));
  return K::update_with_box(rt, name, alloc, [&] { return rt.update(name, K::data_of(view), b); });
}

}  // namespace ckpt

#endif  // CKPT_RUNTIME_KOKKOS_HPP
