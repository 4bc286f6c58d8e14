// The one output writer (core/output_file.hpp): atomic replacement of regular files through symlinks,
// devices and FIFOs written in place, folders, block devices and sockets refused, no temporary left behind.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "artune/core/error.hpp"
#include "artune/core/output_file.hpp"
#include "tests/test_support.hpp"

using namespace artune;
namespace fs = std::filesystem;

namespace {

using artune_test::error_of;
using artune_test::ScratchDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Entries of a folder (the temporaries start with '.', so they are counted too).
int entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("output_file.regular_replaced_atomically_keeping_mode") {
  ScratchDir dir("artune-out");
  const std::string path = dir.file("t.json");
  put(path, "previous");
  ::chmod(path.c_str(), 0640);
  write_output_file(path, "new text\n", "-o");
  CHECK(slurp(path) == "new text\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  CHECK(entries(dir.path()) == 1);
  // A new file gets 0666 less the umask.
  const mode_t old = ::umask(027);
  write_output_file(dir.file("new.json"), "x");
  ::umask(old);
  REQUIRE(::stat(dir.file("new.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("output_file.symlink_to_file_keeps_the_link") {
  ScratchDir dir("artune-out");
  fs::create_directory(dir.path() / "shared");
  const std::string target = dir.file("shared/table.json");
  put(target, "old");
  fs::create_symlink("shared/table.json", dir.path() / "link.json");
  write_output_file(dir.file("link.json"), "updated");
  CHECK(fs::is_symlink(dir.path() / "link.json"));
  CHECK(slurp(target) == "updated");
  CHECK(entries(dir.path() / "shared") == 1);  // the temporary was made beside the target, then renamed
  // A dangling link creates its target.
  fs::create_symlink("shared/fresh.json", dir.path() / "dangling");
  write_output_file(dir.file("dangling"), "fresh");
  CHECK(fs::is_symlink(dir.path() / "dangling"));
  CHECK(slurp(dir.file("shared/fresh.json")) == "fresh");
  // A chain of links is followed to its end; a loop is refused.
  fs::create_symlink("link.json", dir.path() / "link2.json");
  write_output_file(dir.file("link2.json"), "twice");
  CHECK(slurp(target) == "twice");
  fs::create_symlink("loop_b", dir.path() / "loop_a");
  fs::create_symlink("loop_a", dir.path() / "loop_b");
  CHECK(contains(error_of([&] { write_output_file(dir.file("loop_a"), "x", "-o"); }), "symbolic links"));
}

TEST_CASE("output_file.folders_sockets_and_block_devices_refused") {
  ScratchDir dir("artune-out");
  fs::create_directory(dir.path() / "sub");
  fs::create_directory_symlink("sub", dir.path() / "dirlink");
  std::string msg = error_of([&] { write_output_file(dir.file("sub"), "x", "-o/--output"); });
  CHECK(contains(msg, "-o/--output: '"));
  CHECK(contains(msg, "is a directory"));
  msg = error_of([&] { write_output_file(dir.file("dirlink"), "x", "-o/--output"); });
  CHECK(contains(msg, "is a directory"));
  CHECK(fs::is_symlink(dir.path() / "dirlink"));
  CHECK(fs::is_empty(dir.path() / "sub"));
  // A socket.
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = dir.file("sock");
  REQUIRE(sock_path.size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock_path.c_str());
  REQUIRE(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  msg = error_of([&] { write_output_file(sock_path, "x", "-o"); });
  ::close(sock);
  CHECK(contains(msg, "block device or socket"));
  CHECK(fs::is_socket(sock_path));
  CHECK_THROWS_AS(check_output_file(sock_path, "-o"), InvalidInput);
  // A block device, made in the scratch folder where mknod is allowed (root).
  if (::geteuid() == 0 && ::mknod(dir.file("blk").c_str(), S_IFBLK | 0600, makedev(7, 200)) == 0) {
    msg = error_of([&] { write_output_file(dir.file("blk"), "x", "-o"); });
    CHECK(contains(msg, "block device or socket"));
    CHECK(fs::is_block_file(dir.file("blk")));
  }
  // A missing folder.
  msg = error_of([&] { write_output_file(dir.file("nope/t.json"), "x", "-o"); });
  CHECK(contains(msg, "does not exist"));
  CHECK(!fs::exists(dir.path() / "nope"));
  CHECK(contains(error_of([&] { write_output_file("", "x", "-o"); }), "-o: empty file name"));
}

TEST_CASE("output_file.character_device_written_in_place") {
  ScratchDir dir("artune-out");
  if (::geteuid() == 0 && ::mknod(dir.file("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    write_output_file(dir.file("null"), "into the void", "-o");
    CHECK(fs::is_character_file(dir.file("null")));  // the node is still a device, not a regular file
    CHECK(entries(dir.path()) == 1);
    CHECK_NOTHROW(check_output_file(dir.file("null"), "-o"));
  } else {
    MESSAGE("not root: the mknod case is covered through /dev/null only");
  }
  write_output_file("/dev/null", "x", "-o");
  CHECK(fs::is_character_file("/dev/null"));
  // /dev/full: the write fails (exit 3), never "success" with nothing written.
  if (fs::exists("/dev/full")) {
    try {
      write_output_file("/dev/full", std::string(1 << 16, 'x'), "-o");
      FAIL("writing /dev/full succeeded");
    } catch (const BackendFailure& e) {
      CHECK(contains(e.what(), "No space left"));
    }
  }
}

TEST_CASE("output_file.fifo_written_in_place") {
  ScratchDir dir("artune-out");
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  write_output_file(fifo, "through the pipe", "-o");
  reader.join();
  CHECK(got == "through the pipe");
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("output_file.check_before_work") {
  ScratchDir dir("artune-out");
  CHECK_NOTHROW(check_output_file(dir.file("t.json"), "-o"));
  CHECK(entries(dir.path()) == 0);  // the probe file is gone
  CHECK(contains(error_of([&] { check_output_file(dir.file("missing/t.json"), "-o"); }), "does not exist"));
  // /proc refuses new files even for root: the probe catches what access(W_OK) would let through.
  CHECK(contains(error_of([&] { check_output_file("/proc/artune-t.json", "-o"); }), "not writable"));
  CHECK(contains(error_of([&] { check_output_folder("/proc/artune-report", "--report"); }), "not writable"));
  put(dir.file("file"), "x");
  CHECK(contains(error_of([&] { check_output_folder(dir.file("file"), "--report"); }), "not a folder"));
  CHECK_NOTHROW(check_output_folder(dir.file("new/deeper"), "--report"));
  CHECK(!fs::exists(dir.path() / "new"));
}

TEST_CASE("output_file.temp_dir_private_and_removed") {
  fs::path seen;
  {
    TempDir a("artune-test");
    TempDir b("artune-test");
    seen = a.path();
    CHECK(a.path() != b.path());
    struct stat st {};
    REQUIRE(::lstat(a.path().c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 0777) == 0700);
    put((a.path() / "x").string(), "y");
  }
  CHECK(!fs::exists(seen));
}

TEST_CASE("output_file.ignored_signal_stays_ignored") {
  // nohup and a shell's background jobs ignore SIGHUP/SIGINT: a write must not turn them fatal.
  ScratchDir dir("artune-out");
  const std::string path = dir.file("t.json");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGHUP, SIG_IGN);
    const std::string text(8 << 20, 'y');
    for (int i = 0; i < 20; ++i) write_output_file(path, text);
    ::_exit(0);
  }
  ::usleep(100000);
  ::kill(pid, SIGHUP);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(fs::file_size(path) == (8u << 20));
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("output_file.escape_control") {
  CHECK(escape_control("plain name") == "plain name");
  CHECK(escape_control("a\nb\tc\x1b[31m") == "a\\nb\\tc\\x1b[31m");
  CHECK(escape_control(std::string("z\x7f", 2)) == "z\\x7f");
}

TEST_CASE("output_file.signal_during_write_leaves_no_temporary") {
  // A child rewrites a large file over and over; SIGINT, SIGTERM and SIGHUP land at random points, most of
  // them while a temporary exists. The target is always whole (old or new) and no temporary is left.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    ScratchDir dir("artune-out");
    const std::string path = dir.file("big.json");
    const std::string text(32 << 20, 'x');
    put(path, text);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // As in the artune command: the default actions (doctest installs crash handlers of its own, and the
      // writer leaves a program's own handlers alone).
      for (const int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
      for (;;) write_output_file(path, text);
    }
    ::usleep(300000);
    ::kill(pid, sig);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == sig));
    CHECK(entries(dir.path()) == 1);
    CHECK(fs::file_size(path) == text.size());
  }
}
