// Pipes under descriptors 1 and 2, and a thread that forwards them (see stream_capture.h).
#include "interp/stream_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace mg::lua {

namespace {

const char* const kNames[2] = {"stdout", "stderr"};

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("output capture: ") + what + ": " + std::strerror(errno));
}

// The length of s's prefix that ends on a whole UTF-8 character (a read may split one).
size_t whole_utf8(const std::string& s) {
  size_t n = s.size(), i = n;
  for (int back = 0; back < 4 && i > 0; back++) {
    unsigned char c = static_cast<unsigned char>(s[i - 1]);
    if (c < 0x80) return n; // ASCII: complete
    i--;
    if ((c & 0xC0) == 0xC0) { // a lead byte: is its sequence complete?
      size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
      return n - i >= need ? n : i;
    }
  }
  return n; // not UTF-8: pass it on (the JSON encoder replaces bad bytes)
}

} // namespace

StreamCapture::StreamCapture(Sink sink) : sink_(std::move(sink)) {
  std::fflush(stdout);
  std::fflush(stderr);
  check(pipe2(wake_, O_CLOEXEC) == 0, "pipe");
  for (int i = 0; i < 2; i++) {
    int p[2];
    check(pipe2(p, O_CLOEXEC) == 0, "pipe");
    read_[i] = p[0];
    check(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0, "fcntl");
    saved_[i] = fcntl(i + 1, F_DUPFD_CLOEXEC, 3);
    check(saved_[i] >= 0, "dup");
    check(dup2(p[1], i + 1) >= 0, "dup2"); // the new 1 or 2 is inherited by child processes
    close(p[1]);
  }
  // line by line: a print shows when it ends; a progress bar's "\r" line shows on io.flush()
  setvbuf(stdout, nullptr, _IOLBF, 0);
  thread_ = std::thread([this] { forward_loop(); });
}

StreamCapture::~StreamCapture() {
  char c = 0;
  (void)!write(wake_[1], &c, 1);
  thread_.join();
  std::fflush(stdout);
  std::fflush(stderr);
  for (int i = 0; i < 2; i++) {
    dup2(saved_[i], i + 1);
    close(saved_[i]);
    close(read_[i]);
  }
  close(wake_[0]);
  close(wake_[1]);
}

void StreamCapture::set_live(bool live) {
  std::lock_guard<std::mutex> g(mu_);
  live_ = live;
}

void StreamCapture::flush() {
  std::fflush(stdout);
  std::fflush(stderr);
  std::lock_guard<std::mutex> g(mu_);
  drain();
}

void StreamCapture::drain() {
  char buf[65536];
  for (int i = 0; i < 2; i++) {
    for (;;) {
      ssize_t n = read(read_[i], buf, sizeof buf);
      if (n > 0) {
        pending_[i].append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break; // EAGAIN: nothing more now
    }
    if (!live_ || !sink_) { // no cell to show it in: the kernel's log
      (void)!write(saved_[1], pending_[i].data(), pending_[i].size());
      pending_[i].clear();
      continue;
    }
    size_t whole = whole_utf8(pending_[i]);
    if (whole == 0) continue;
    std::string text = pending_[i].substr(0, whole);
    pending_[i].erase(0, whole);
    sink_(kNames[i], text);
  }
}

void StreamCapture::forward_loop() {
  pollfd fds[3] = {{read_[0], POLLIN, 0}, {read_[1], POLLIN, 0}, {wake_[0], POLLIN, 0}};
  for (;;) {
    int r = poll(fds, 3, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (fds[2].revents & POLLIN)) return;
    // a moment for the rest of a burst (print writes each argument separately): fewer, larger
    // messages, and the notebook still updates many times a second
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> g(mu_);
    drain();
  }
}

} // namespace mg::lua
