#include "artune/core/output_file.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "artune/core/error.hpp"

namespace artune {

namespace {

namespace fs = std::filesystem;

// Linux gives up on a chain of more than 40 links (ELOOP); so do we.
constexpr int kMaxLinkHops = 40;

std::string prefix(const std::string& path, std::string_view what) {
  return what.empty() ? escape_control(path) : fmt::format("{}: '{}'", what, escape_control(path));
}

std::string errno_text(int err) { return std::strerror(err); }

/// Where and how a path is written.
struct Target {
  std::string path;  ///< the file to write (symlinks resolved for replacement)
  bool write_through = false;
  bool exists = false;  ///< a regular file is there (its mode is kept)
  struct stat st {};
};

bool is_proc_fd_link(const std::string& p) {
  // /dev/stdout -> /proc/self/fd/1 -> "pipe:[123]" or the shell's redirection target: a "magic" link that
  // stands for an open file description, so the write goes through it instead of replacing its target.
  return (p.rfind("/proc/", 0) == 0 && p.find("/fd/") != std::string::npos) || p.rfind("/dev/fd/", 0) == 0;
}

Target resolve(const std::string& path, std::string_view what) {
  if (path.empty())
    throw InvalidInput(what.empty() ? std::string("empty file name") : fmt::format("{}: empty file name", what));
  std::string p = path;
  for (int hop = 0;; ++hop) {
    if (hop > kMaxLinkHops)
      throw InvalidInput(fmt::format("{}: too many levels of symbolic links", prefix(path, what)));
    Target t;
    if (is_proc_fd_link(p)) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) {
        throw InvalidInput(fmt::format("{}: cannot write ({})", prefix(path, what), errno_text(errno)));
      }
      if (S_ISDIR(st.st_mode)) throw InvalidInput(fmt::format("{}: is a directory, not a file", prefix(path, what)));
      if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
        throw InvalidInput(
            fmt::format("{}: is a block device or socket; artune writes only files, character "
                        "devices and FIFOs",
                        prefix(path, what)));
      }
      t.path = p;
      t.write_through = true;
      t.st = st;
      return t;
    }
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        t.path = p;  // a new file (its folder is checked when the temporary is created)
        return t;
      }
      throw InvalidInput(fmt::format("{}: cannot write ({})", prefix(path, what), errno_text(errno)));
    }
    if (S_ISLNK(st.st_mode)) {
      std::vector<char> buf(static_cast<std::size_t>(PATH_MAX) + 1);
      const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
      if (n < 0) throw InvalidInput(fmt::format("{}: cannot read link ({})", prefix(path, what), errno_text(errno)));
      const fs::path link(std::string(buf.data(), static_cast<std::size_t>(n)));
      p = link.is_absolute() ? link.string() : (fs::path(p).parent_path() / link).string();
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      t.path = p;
      t.exists = true;
      t.st = st;
      return t;
    }
    if (S_ISDIR(st.st_mode)) throw InvalidInput(fmt::format("{}: is a directory, not a file", prefix(path, what)));
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      t.path = p;
      t.write_through = true;
      t.st = st;
      return t;
    }
    throw InvalidInput(
        fmt::format("{}: is a block device or socket; artune writes only files, character devices "
                    "and FIFOs",
                    prefix(path, what)));
  }
}

fs::path folder_of(const std::string& file) {
  fs::path dir = fs::path(file).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

mode_t current_umask() {
  // umask() can only be read by setting it; the /proc field avoids the window where another thread would
  // create files with a zero mask.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  }
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return mask;
}

// ---- the temporary file and the signals that must not leave it behind ---------------------------

// One write at a time: the signal handler knows the one temporary file to remove.
std::mutex g_write_mutex;
volatile std::sig_atomic_t g_armed = 0;
char g_tmp_path[PATH_MAX + 1];
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];
bool g_installed[3] = {false, false, false};

extern "C" void remove_temporary_and_reraise(int sig) {
  if (g_armed) ::unlink(g_tmp_path);  // async-signal-safe
  g_armed = 0;
  // Die of the same signal (the previous disposition is restored after the write, too late here).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

sigset_t cleanup_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kCleanupSignals) sigaddset(&set, s);
  return set;
}

/// Blocks the cleanup signals for its lifetime (so that registering or renaming the temporary is not cut).
class SignalBlock {
 public:
  SignalBlock() {
    const sigset_t set = cleanup_set();
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalBlock() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t old_{};
};

/// The temporary file of one replacement: created by mkstemp beside the target, removed unless renamed.
class TemporaryFile {
 public:
  TemporaryFile(const fs::path& dir, const std::string& name, const std::string& shown) {
    const std::string tmpl = (dir / ("." + name + ".tmp.XXXXXX")).string();
    if (tmpl.size() > PATH_MAX) throw InvalidInput(fmt::format("{}: path too long", shown));
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    SignalBlock block;  // the name is registered before any signal can see the file
    fd_ = ::mkstemp(buf.data());
    if (fd_ < 0) {
      const int err = errno;
      std::error_code ec;
      if (!fs::is_directory(dir, ec)) {
        throw InvalidInput(
            fmt::format("{}: cannot write: folder '{}' does not exist", shown, escape_control(dir.string())));
      }
      throw InvalidInput(
          fmt::format("{}: cannot write in folder '{}' ({})", shown, escape_control(dir.string()), errno_text(err)));
    }
    path_.assign(buf.data());
    std::memcpy(g_tmp_path, path_.c_str(), path_.size() + 1);
    g_armed = 1;
    // Only where the signal would kill the process as it stands (default action): an ignored signal (nohup,
    // a shell's background job) must stay ignored, and a program's own handler keeps deciding.
    struct sigaction sa {};
    sa.sa_handler = remove_temporary_and_reraise;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kCleanupSignals); ++i) {
      g_installed[i] = false;
      if (::sigaction(kCleanupSignals[i], nullptr, &g_previous[i]) != 0) continue;
      const bool dfl = (g_previous[i].sa_flags & SA_SIGINFO) == 0 && g_previous[i].sa_handler == SIG_DFL;
      if (dfl && ::sigaction(kCleanupSignals[i], &sa, nullptr) == 0) g_installed[i] = true;
    }
  }
  ~TemporaryFile() {
    SignalBlock block;
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
    g_armed = 0;
    for (std::size_t i = 0; i < std::size(kCleanupSignals); ++i) {
      if (g_installed[i]) ::sigaction(kCleanupSignals[i], &g_previous[i], nullptr);
    }
    // A signal that arrived meanwhile is delivered when the block ends, to the previous disposition.
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  /// Closes the descriptor; the result of close() counts (NFS and full disks report there).
  int close() {
    const int r = ::close(fd_);
    fd_ = -1;
    return r;
  }
  /// rename() over `target`; the temporary no longer needs removing once it succeeded.
  int rename_to(const std::string& target) {
    SignalBlock block;
    const int r = std::rename(path_.c_str(), target.c_str());
    if (r == 0) {
      renamed_ = true;
      g_armed = 0;
    }
    return r;
  }

 private:
  int fd_ = -1;
  std::string path_;
  bool renamed_ = false;
};

/// write() all of `text`; errno of the failure, 0 on success.
int write_all(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    done += static_cast<std::size_t>(w);
  }
  return 0;
}

void write_through(const Target& t, std::string_view text, const std::string& shown) {
  // A regular file reached through /proc/self/fd (`-o /dev/stdout > file`) is appended to, as the shell's
  // own descriptor would; devices and FIFOs ignore the flag.
  const int flags = O_WRONLY | O_NOCTTY | O_CLOEXEC | (S_ISREG(t.st.st_mode) ? O_APPEND : 0);
  const int fd = ::open(t.path.c_str(), flags);
  if (fd < 0) throw InvalidInput(fmt::format("{}: cannot write ({})", shown, errno_text(errno)));
  const int err = write_all(fd, text);
  const int closed = ::close(fd);
  if (err != 0) throw BackendFailure(fmt::format("{}: write failed ({})", shown, errno_text(err)));
  if (closed != 0 && errno != EINTR)
    throw BackendFailure(fmt::format("{}: write failed ({})", shown, errno_text(errno)));
}

void replace_atomically(const Target& t, std::string_view text, const std::string& shown) {
  const fs::path dir = folder_of(t.path);
  std::lock_guard<std::mutex> lock(g_write_mutex);
  TemporaryFile tmp(dir, fs::path(t.path).filename().string(), shown);
  if (const int err = write_all(tmp.fd(), text); err != 0) {
    throw BackendFailure(fmt::format("{}: write failed ({})", shown, errno_text(err)));
  }
  const mode_t mode = t.exists ? (t.st.st_mode & 07777) : (0666 & ~current_umask());
  if (t.exists && ::geteuid() == 0) {
    // Root replacing another user's file keeps its owner; failure (e.g. on some network file systems) is harmless.
    [[maybe_unused]] const int ignored = ::fchown(tmp.fd(), t.st.st_uid, t.st.st_gid);
  }
  if (::fchmod(tmp.fd(), mode) != 0 || ::fsync(tmp.fd()) != 0) {
    throw BackendFailure(fmt::format("{}: write failed ({})", shown, errno_text(errno)));
  }
  if (tmp.close() != 0) throw BackendFailure(fmt::format("{}: write failed ({})", shown, errno_text(errno)));
  if (tmp.rename_to(t.path) != 0) {
    throw InvalidInput(fmt::format("{}: cannot write ({})", shown, errno_text(errno)));
  }
  // Make the rename itself durable; a failure here leaves a complete file either way.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

/// Creating (and removing) a temporary file is the one writability test that also holds for root.
void probe_folder(const fs::path& dir, const std::string& shown) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InvalidInput(fmt::format("{}: folder '{}' does not exist", shown, escape_control(dir.string())));
  }
  std::string tmpl = (dir / ".artune-probe.XXXXXX").string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    throw InvalidInput(
        fmt::format("{}: folder '{}' is not writable ({})", shown, escape_control(dir.string()), errno_text(errno)));
  }
  ::close(fd);
  ::unlink(tmpl.c_str());
}

}  // namespace

std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

void write_output_file(const std::string& path, std::string_view text, std::string_view what) {
  const std::string shown = prefix(path, what);
  const Target t = resolve(path, what);
  if (t.write_through) {
    write_through(t, text, shown);
  } else {
    replace_atomically(t, text, shown);
  }
}

void check_output_file(const std::string& path, std::string_view what) {
  const std::string shown = prefix(path, what);
  const Target t = resolve(path, what);
  if (t.write_through) {
    if (::access(t.path.c_str(), W_OK) != 0) {
      throw InvalidInput(fmt::format("{}: not writable ({})", shown, errno_text(errno)));
    }
    return;
  }
  probe_folder(folder_of(t.path), shown);
}

void check_output_folder(const std::string& path, std::string_view what) {
  const std::string shown = prefix(path, what);
  if (path.empty())
    throw InvalidInput(what.empty() ? std::string("empty folder name") : fmt::format("{}: empty folder name", what));
  std::error_code ec;
  fs::path p(path);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) throw InvalidInput(fmt::format("{}: exists and is not a folder", shown));
    probe_folder(p, shown);
    return;
  }
  // The folder is created at the end: its nearest existing ancestor must be a writable folder.
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  if (p.empty()) p = ".";
  if (!fs::is_directory(p, ec)) {
    throw InvalidInput(fmt::format("{}: '{}' is not a folder", shown, escape_control(p.string())));
  }
  probe_folder(p, shown);
}

void make_output_folder(const std::string& path, std::string_view what) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path)) {
    throw InvalidInput(fmt::format("{}: cannot create folder ({})", prefix(path, what),
                                   ec ? ec.message() : std::string("not a folder")));
  }
}

TempDir::TempDir(std::string_view prefix_text) {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / (std::string(prefix_text) + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw BackendFailure(
        fmt::format("cannot create a temporary folder in '{}' ({})", escape_control(base.string()), errno_text(errno)));
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace artune
