#pragma once
// Internal helpers shared by the pki sources; not part of any public interface.

#include <optional>
#include <string>
#include <string_view>

#include "pki/certificate.hpp"
#include "pki/key.hpp"
#include "pki/ossl.hpp"

namespace sempi::pki::detail {

/// A read-only memory BIO over `data` (which must outlive the BIO). Throws sempi::Error.
BioPtr read_bio(std::string_view data);
/// An empty, writable memory BIO. Throws sempi::Error.
BioPtr write_bio();
/// Everything written to a memory BIO so far.
std::string bio_contents(BIO* bio);

/// PEM password callback that refuses: encrypted keys are an error, never a terminal prompt.
int refuse_password(char* buf, int size, int rwflag, void* userdata);

/// nullopt if the ASN1_TIME is malformed.
std::optional<SystemTime> from_asn1_time(const ASN1_TIME* t);
/// Sets `field` (e.g. X509_getm_notAfter) to `t`, whole seconds. Throws sempi::Error.
void set_asn1_time(ASN1_TIME* field, SystemTime t);

/// The sempi key type of `key`; nullopt for anything else (RSA, other curves, ...).
std::optional<KeyType> key_type_of(EVP_PKEY* key);

/// The digest to sign with `key`: SHA-256 for ECDSA, none for Ed25519 (it hashes internally).
const EVP_MD* signature_digest(EVP_PKEY* key);

}  // namespace sempi::pki::detail
