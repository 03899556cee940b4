// moongrad-kernel: the Jupyter kernel, a second main over the REPL's Lua state. Jupyter starts
// it as `moongrad-kernel -f CONNECTION_FILE` (the kernelspec, written by ./run.sh --install-kernel).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include <xeus/xhelper.hpp>
#include <xeus/xkernel.hpp>
#include <xeus/xkernel_configuration.hpp>
#include <xeus/xserver_zmq.hpp>
#include <zmq.hpp>

#include "engine/device.h"
#include "engine/settings.h"
#include "interp/interrupt.h"
#include "interp/jupyter_kernel.h"

namespace {

const char* kUsage =
    "usage: moongrad-kernel -f CONNECTION_FILE\n"
    "The Jupyter kernel of moongrad; Jupyter starts it (./run.sh --install-kernel registers it).\n";

int run(int argc, char** argv) {
  std::string file = xeus::extract_filename(argc, argv);
  if (file.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  // Before any thread starts, so that every thread inherits it: SIGINT is taken by the main
  // thread alone, only while a cell runs (jupyter_kernel.cpp).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  mg::lua::install_interrupt_handler();
  // a cell has no terminal to read from: io.read() gets end of input instead of waiting forever
  if (!std::freopen("/dev/null", "r", stdin)) std::perror("moongrad-kernel: /dev/null");
  mg::check_runnable(mg::settings().device); // a bad DEV= is the reason in the log, not a dead cell

  xeus::xconfiguration config = xeus::load_configuration(file);
  auto context = xeus::make_context<zmq::context_t>();
  auto interpreter = std::make_unique<mg::lua::JupyterKernel>();
  // replace: bytes that are not UTF-8 (a binary file printed) become U+FFFD instead of an
  // exception in the middle of a message
  xeus::xkernel kernel(config, xeus::get_user_name(), std::move(context), std::move(interpreter),
                       xeus::make_xserver_zmq, xeus::make_in_memory_history_manager(), nullptr,
                       xeus::make_null_debugger, nl::json::object(), nl::json::error_handler_t::replace);
  std::fprintf(stderr, "moongrad-kernel: starting (connection file %s)\n", file.c_str());
  kernel.start();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // Jupyter shows this stream in its log: a kernel that cannot start says why there.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moongrad-kernel: cannot start: %s\n", e.what());
    return 1;
  }
}
