// The REPL on a real terminal: moongrad runs in a pseudo-terminal and gets keystrokes, as a
// user at a shell would type them. Checks tab completion, history (also across sessions),
// Ctrl-R search, Ctrl-C and Ctrl-D.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// One moongrad process on a pty, with its own data dir (history) and kernel cache.
class Terminal {
public:
  explicit Terminal(const fs::path& home) {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ < 0) throw std::runtime_error("forkpty failed");
    if (pid_ == 0) {
      setenv("TERM", "xterm", 1);
      setenv("XDG_DATA_HOME", home.c_str(), 1);
      unsetenv("DEBUG");
      execl(MG_EXE, MG_EXE, static_cast<char*>(nullptr));
      _exit(127);
    }
    REQUIRE(wait_for("mg> "));
  }
  ~Terminal() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }
  void type(const std::string& keys) {
    // libedit prints the prompt and then puts the terminal in raw mode: a control key sent in
    // between meets the cooked terminal (^D, ^R mean other things there). People type slower.
    usleep(100000);
    out_.clear();
    REQUIRE(write(fd_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size()));
  }
  // Reads until `what` has appeared in the output since the last type(), or 20 s pass
  // (the first kernel compile of a cold cache takes a while).
  bool wait_for(const std::string& what) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (out_.find(what) == std::string::npos) {
      if (std::chrono::steady_clock::now() > end) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buf[4096];
        ssize_t n = read(fd_, buf, sizeof buf);
        if (n <= 0) return false;
        out_.append(buf, static_cast<size_t>(n));
      }
    }
    return true;
  }
  const std::string& output() const { return out_; }
  int wait_exit() {
    int status = 0;
    for (int i = 0; i < 200; i++) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      usleep(50000);
    }
    return -2;
  }

private:
  int fd_ = -1;
  pid_t pid_ = -1;
  std::string out_;
};

struct TempHome {
  fs::path dir;
  TempHome() {
    char tmpl[] = "/tmp/mg_pty_XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~TempHome() { fs::remove_all(dir); }
};

} // namespace

TEST_CASE("TAB completes tensor methods after x: and x.") {
  TempHome home;
  Terminal t(home.dir);
  t.type("x = Tensor{1,2,3}\r");
  REQUIRE(t.wait_for("\r\nmg> "));
  t.type("x:re\t"); // several candidates: the list is shown
  REQUIRE(t.wait_for("reshape"));
  REQUIRE(t.wait_for("mg> x:re")); // the line is redrawn under the list
  CHECK(t.output().find("relu") != std::string::npos);
  CHECK(t.output().find("realize") != std::string::npos);
  CHECK(t.output().find("sum") == std::string::npos);
  t.type("sh\t(3,1)\r"); // one candidate left: completed to x:reshape
  REQUIRE(t.wait_for("shape=(3, 1)"));
  REQUIRE(t.wait_for("\r\nmg> "));
  t.type("x.shap\t\r"); // a property
  REQUIRE(t.wait_for("{3}\r\nmg> "));
  t.type("Tens\t.ey\t(2):sum()\r"); // globals, then a table field
  REQUIRE(t.wait_for("Tensor(2., shape=()"));
  REQUIRE(t.wait_for("\r\nmg> "));
  t.type(":sr\t x*2\r"); // colon commands complete too
  REQUIRE(t.wait_for("void E_3"));
}

TEST_CASE("history: up arrow, Ctrl-R, and the history file across sessions") {
  TempHome home;
  {
    Terminal t(home.dir);
    t.type("a = 40 + 2\r");
    REQUIRE(t.wait_for("\r\nmg> "));
    t.type("print('second')\r");
    REQUIRE(t.wait_for("\r\nmg> "));
    t.type("\x1b[A\x1b[A\r"); // up twice: the assignment again
    REQUIRE(t.wait_for("\r\nmg> "));
    t.type("a\r");
    REQUIRE(t.wait_for("42\r\nmg> ")); // keys sent before the prompt would meet a cooked tty
    t.type("\x12seco\r");              // Ctrl-R: the line with "seco" in it, run
    REQUIRE(t.wait_for("second\r\nmg> "));
    t.type("\x04"); // Ctrl-D on an empty line
    CHECK(t.wait_exit() == 0);
  }
  std::ifstream f(home.dir / "moongrad" / "history");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text.find("print('second')") != std::string::npos);
  Terminal t2(home.dir); // a new session sees the old lines
  t2.type("\x1b[A\r");
  INFO("screen: " << t2.output());
  REQUIRE(t2.wait_for("second\r\n"));
}

TEST_CASE("Ctrl-C abandons the entry and interrupts running Lua, Ctrl-D exits") {
  TempHome home;
  Terminal t(home.dir);
  t.type("for i = 1, 3 do\r");
  REQUIRE(t.wait_for("..> ")); // continuation prompt
  t.type("\x03");              // abandon the unfinished for loop
  REQUIRE(t.wait_for("\r\nmg> "));
  t.type("1 + 1\r");
  REQUIRE(t.wait_for("2\r\nmg> "));
  t.type("while true do end\r");
  REQUIRE(t.wait_for("end\r\n"));
  usleep(300000); // the loop is running: the terminal is cooked again, so Ctrl-C is SIGINT
  t.type("\x03"); // now SIGINT from the terminal: the loop is stopped
  REQUIRE(t.wait_for("interrupted"));
  REQUIRE(t.wait_for("\r\nmg> "));
  t.type("error('boom')\r");
  REQUIRE(t.wait_for("stdin:1: boom\r\nmg> "));
  t.type("\x04");
  CHECK(t.wait_exit() == 0);
}
