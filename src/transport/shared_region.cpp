#include "transport/shared_region.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

namespace sempi::transport {
namespace {

static_assert(2 * sizeof(RingControl) <= SharedRegion::kControlBytes);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free &&
              std::atomic_ref<std::uint32_t>::is_always_lock_free,
              "the rings need lock-free atomics that work across processes");

constexpr unsigned kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

bool valid_ring_bytes(std::size_t bytes) {
  return bytes >= SharedRegion::kMinRingBytes && bytes <= SharedRegion::kMaxRingBytes &&
         bytes % 4096 == 0;
}

}  // namespace

std::size_t SharedRegion::ring_bytes_for(std::size_t ranks) noexcept {
  const std::size_t share = kRingBudget / std::max<std::size_t>(ranks, 2);
  return std::clamp(share / 4096 * 4096, kMinRingBytes, kMaxRingBytes);
}

std::unique_ptr<SharedRegion> SharedRegion::create(std::size_t ring_bytes, std::string& error) {
  if (!valid_ring_bytes(ring_bytes)) {
    error = "no shared rings of " + std::to_string(ring_bytes) + " bytes";
    return nullptr;
  }
  UniqueFd fd(::memfd_create("sempi-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) {
    error = errno_text("memfd_create");
    return nullptr;
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(kControlBytes + 2 * ring_bytes)) != 0) {
    error = errno_text("ftruncate of the shared rings");
    return nullptr;
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, kRequiredSeals) != 0) {
    error = errno_text("sealing the shared rings");
    return nullptr;
  }
  std::unique_ptr<SharedRegion> region(new SharedRegion(std::move(fd), ring_bytes));
  if (!region->map(error)) return nullptr;
  // A new memfd reads as zeros; start the control words' lifetime explicitly all the same.
  new (region->controls_) RingControl[2]{};
  return region;
}

std::unique_ptr<SharedRegion> SharedRegion::adopt(UniqueFd fd, std::string& error) {
  // Seals first: once SHRINK and GROW are set the size can never change again, so the size
  // read next is the size the mapping will have. Read the other way round, the peer could
  // shrink the file between the two calls and then seal it, and our first access past its
  // new end would be a SIGBUS. F_GET_SEALS also refuses anything but a memfd before fstat.
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & kRequiredSeals) != kRequiredSeals) {
    error = "the peer's shared rings are not a sealed memfd";
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    error = errno_text("fstat of the peer's shared rings");
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    error = "the peer's shared rings are not a sealed memfd";
    return nullptr;
  }
  const auto size = static_cast<std::size_t>(std::max<off_t>(st.st_size, 0));
  const std::size_t ring_bytes = size > kControlBytes ? (size - kControlBytes) / 2 : 0;
  if (!valid_ring_bytes(ring_bytes) || kControlBytes + 2 * ring_bytes != size) {
    error = "the peer's shared rings are " + std::to_string(st.st_size) +
            " bytes, not a control page and two rings of 64 to 512 KiB";
    return nullptr;
  }
  std::unique_ptr<SharedRegion> region(new SharedRegion(std::move(fd), ring_bytes));
  if (!region->map(error)) return nullptr;
  region->close_fd();  // the mapping keeps the memory
  return region;
}

bool SharedRegion::map(std::string& error) {
  void* mapping = ::mmap(nullptr, file_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (mapping == MAP_FAILED) {
    error = errno_text("mapping the shared rings");
    return false;
  }
  mapping_ = mapping;
  controls_ = static_cast<RingControl*>(mapping_);
  return true;
}

SharedRegion::~SharedRegion() {
  if (mapping_ != nullptr) ::munmap(mapping_, file_bytes());
}

}  // namespace sempi::transport
