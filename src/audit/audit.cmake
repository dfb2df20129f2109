# The audit log: writer with hash chain, seal, and the reader behind `sempi audit`.
# Depends on pki (OpenSSL crypto) only, never on transport.
sempi_module(audit
  SOURCES audit/audit_log.cpp audit/seal.cpp audit/audit_reader.cpp
  PUBLIC_DEPS sempi::pki nlohmann_json::nlohmann_json)

# The runtime and the launcher write audit logs. Linked here, where the target exists, so the
# core and launch modules need no knowledge of whether audit is built.
if(TARGET sempi_core)
  target_link_libraries(sempi_core PUBLIC sempi::audit)
endif()
if(TARGET sempi_launch)
  target_link_libraries(sempi_launch PUBLIC sempi::audit)
endif()
