// The kernel's stdout and stderr as Jupyter streams. Everything the process writes to file
// descriptors 1 and 2 (Lua's print and io.write, the engine's DEBUG lines, a compiler's
// warnings) goes into pipes; a thread forwards what arrives to a sink while a cell runs, so
// output shows in the notebook as it happens. The kernel's own log keeps the original stderr.
#pragma once
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mg::lua {

class StreamCapture {
public:
  // sink("stdout" or "stderr", text): called with the lock held, from the forwarding thread or
  // from the thread calling flush(); text ends on a whole UTF-8 character.
  using Sink = std::function<void(const std::string& name, const std::string& text)>;
  explicit StreamCapture(Sink sink); // throws std::runtime_error if the pipes cannot be made
  ~StreamCapture();                  // puts the descriptors back
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;

  // While live (a cell runs), output goes to the sink as it comes; otherwise to the kernel's
  // log (the original stderr): between cells there is no cell to show it in.
  void set_live(bool live);
  // Flushes C's stdout/stderr and hands everything written so far to the sink (if live).
  void flush();
  // The lock the sink runs under: hold it to publish anything else while a cell runs, so
  // that only one thread sends at a time.
  std::mutex& lock() { return mu_; }
  // The original stderr, for the kernel's log.
  int log_fd() const { return saved_[1]; }

private:
  void forward_loop();
  void drain(); // with mu_ held

  Sink sink_;
  int read_[2] = {-1, -1};  // the pipes' read ends: stdout, stderr
  int saved_[2] = {-1, -1}; // the original descriptors 1 and 2
  int wake_[2] = {-1, -1};  // written once to stop the thread
  std::string pending_[2];
  bool live_ = false;
  std::mutex mu_;
  std::thread thread_;
};

} // namespace mg::lua
