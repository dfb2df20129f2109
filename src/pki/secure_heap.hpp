#pragma once
// OpenSSL's secure heap, for the private keys sempi generates or loads.
//
// Once it is set up, OpenSSL keeps private keys there (the scalar of an ECDSA key, the bytes of
// an Ed25519 key; pki_test checks both), and with them handshake key shares, signature nonces
// and the state of its random generators: a separate mapping between two inaccessible guard
// pages, so a linear overrun into or out of it faults; locked in memory (mlock, as pages are
// first touched), so it is never swapped to disk; and excluded from core dumps
// (MADV_DONTDUMP), so a crashed rank's core file does not carry its key. Session keys derived
// in handshakes, in OpenSSL and in sempi's record layer, stay on the ordinary heap (wiped when
// they are dropped), as do OpenSSL's short-lived scratch numbers during an operation.
//
// It must exist before the process's first random bytes, for the generators to live there too.
// PrivateKey::generate() and from_pem() set it up on first use, which in a rank (its key, at
// the start of join_job()) and in `sempi pki` comes first; sempirun draws the job id before
// its first key, so it sets the heap up itself. It is process-wide and
// has a fixed size; while it exists OpenSSL takes secure allocations only from it (no fallback
// to malloc when full: the operation fails). A key takes 32-64 bytes there, and each thread
// that draws random bytes 512 (its generators, freed when it exits): about 600 bytes a
// handshake in progress. Rank 0 of a job may run one handshake per other rank at once, so
// kSecureHeapBytes is sized for kMaxRanks (4096) of them with room to spare; locking on first
// touch, a rank's memory grows only by what it uses. A process whose own code set up a secure
// heap first keeps that one, which sempi then shares; SEMPI_SECURE_HEAP=0 leaves it unset, for
// programs that must own that setting or whose other threads use OpenSSL while MPI_Init runs
// (setting it up is not synchronised with their secure allocations).

#include <cstddef>

namespace sempi::pki {

inline constexpr std::size_t kSecureHeapBytes = 4 * 1024 * 1024;

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
