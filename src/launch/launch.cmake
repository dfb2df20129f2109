# The launcher library behind `sempirun`: options, rank processes, output forwarding,
# enrollment and the event loop. Paths are relative to src/.
sempi_module(launch
  SOURCES launch/launch_options.cpp launch/output_forwarder.cpp launch/output_writer.cpp
          launch/enrollment.cpp
          launch/program_path.cpp launch/rank_process.cpp launch/launcher.cpp
          launch/job_socket_dir.cpp launch/terminal_input.cpp
  PUBLIC_DEPS sempi::launch_protocol sempi::pki sempi::policy)
