#pragma once
/// \file
/// sempi's version and wire protocol version.

namespace sempi {

inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 1;
inline constexpr int kVersionPatch = 0;
inline constexpr const char* kVersionString = "0.1.0";

/// Version of the wire protocol spoken inside TLS (frames and HELLO). Peers must match exactly.
// 3: WITHDRAWN frames; 4: of whole collectives; 5: a WITHDRAWN also cancels its sender's
// rendezvous sends in that collective that had no CTS yet; 6: FINALIZING frames.
inline constexpr unsigned kProtocolVersion = 6;

/// Version of the linked library (may differ from kVersionString if headers and library differ).
const char* library_version() noexcept;

}  // namespace sempi
