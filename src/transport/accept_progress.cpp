#include "transport/accept_progress.hpp"

namespace sempi::transport {
namespace {

int handler_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int on_client_hello(SSL* ssl, int* /*alert*/, void* /*arg*/) {
  const auto* handler =
      static_cast<const AcceptProgressHandler*>(SSL_get_ex_data(ssl, handler_index()));
  try {
    if (handler != nullptr && *handler) (*handler)(AcceptProgress::client_hello, 0);
  } catch (...) {  // must not unwind through OpenSSL; a missed report only costs priority
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

}  // namespace

void enable_accept_progress(SSL_CTX* ctx) {
  SSL_CTX_set_client_hello_cb(ctx, on_client_hello, nullptr);
}

bool report_accept_progress(SSL* ssl, const AcceptProgressHandler* handler) {
  // SSL_set_ex_data stores a non-const pointer; the callback only reads through it.
  return handler_index() >= 0 &&
         SSL_set_ex_data(ssl, handler_index(), const_cast<AcceptProgressHandler*>(handler)) == 1;
}

}  // namespace sempi::transport
