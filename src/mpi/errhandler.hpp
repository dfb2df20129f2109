#pragma once
// User-defined error handlers (errhandler.cpp): what raise_code() and new communicator handles
// need from them.

#include <mpi.h>

namespace sempi::mpi {

/// The handler a communicator handle `comm` should hold for `handler`: predefined handlers as
/// they are, a user-defined one as a binding that calls its function with `comm`.
MPI_Errhandler bind_errhandler(MPI_Errhandler handler, MPI_Comm comm);
/// `comm` is going away: its latest binding is not reused for a communicator at its address.
void forget_latest_binding(MPI_Comm comm) noexcept;
/// Gives MPI_COMM_WORLD and MPI_COMM_SELF back MPI_ERRORS_ARE_FATAL if they had a user-defined
/// handler. For the end of MPI_Finalize. User handlers and bindings are never freed (a
/// communicator the program did not free still holds its binding).
void reset_predefined_comm_errhandlers() noexcept;
/// Calls a user-defined handler's function with its communicator and `code`; returns `code`.
int call_user_errhandler(const sempi_mpi_errhandler& handler, int code) noexcept;

}  // namespace sempi::mpi
