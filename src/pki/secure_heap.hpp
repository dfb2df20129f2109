#pragma once
// OpenSSL's secure heap, for the private keys sempi generates or loads.
//
// Once it is set up, OpenSSL keeps private keys there (the scalar of an ECDSA key, the bytes of
// an Ed25519 key; pki_test checks both): a separate mapping with guard pages on both sides, so
// an overrun of an ordinary heap buffer cannot read into it; locked in memory (mlock), so it
// is never swapped to disk; and excluded from core dumps (MADV_DONTDUMP), so a crashed rank's
// core file does not carry its key. Session keys derived in handshakes, in OpenSSL and in
// sempi's record layer, stay on the ordinary heap (wiped when they are dropped).
//
// PrivateKey::generate() and from_pem() set it up on first use, so every process that holds a
// key has one: sempirun (the job CA key, the audit seal key), each rank, `sempi pki`. It is
// process-wide and has a fixed size; while it exists OpenSSL takes secure allocations only
// from it (it does not fall back to malloc when full). A P-256, Ed25519 or X25519 key (the
// latter a handshake's key share) takes 32-64 bytes there, so kSecureHeapBytes holds some
// 4,000 at once. A rank holds its own key and one share per handshake in progress; sempirun
// its two keys and the shares of the handshakes it serves at that moment. A process whose own
// code set up a secure heap first keeps that one; SEMPI_SECURE_HEAP=0 leaves it unset, for
// programs that must own that setting.

#include <cstddef>

namespace sempi::pki {

inline constexpr std::size_t kSecureHeapBytes = 256 * 1024;

enum class SecureHeap {
  locked,       // ours: guard pages, locked in memory, excluded from core dumps
  unprotected,  // ours, but a guard page, mlock or madvise failed (mlock: RLIMIT_MEMLOCK)
  external,     // the process had set one up before sempi
  disabled,     // SEMPI_SECURE_HEAP=0
  unavailable,  // OpenSSL refused (built without secure memory, or mmap failed)
};

/// Sets up the secure heap once per process (thread-safe); later calls return the first
/// result.
SecureHeap ensure_secure_heap() noexcept;

/// "locked", "unprotected", ... for messages and tests.
const char* secure_heap_name(SecureHeap state) noexcept;

}  // namespace sempi::pki
