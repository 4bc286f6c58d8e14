#pragma once
// The one writer for every file artune writes (decision tables, calibration
// overlays, reports and their plots, topology exports). It never destroys what
// is at the path:
//
//  - a regular file or a new path is replaced atomically: a temporary file with
//    an unpredictable name (mkstemp) in the *target's* folder, written, flushed,
//    closed (every step checked), then renamed over the target. Symbolic links
//    are resolved first, so a link stays a link and its target is updated. The
//    new file gets the old file's mode (a new one: 0666 less the umask);
//  - a character device or a FIFO (`--out /dev/stdout`, `/dev/null`, a named pipe)
//    and the /proc/self/fd links behind /dev/stdout are written through in
//    place, without rename, so the node itself is never replaced;
//  - a directory, a block device or a socket is refused (InvalidInput, one line).
//
// The temporary file is removed on every error path and when SIGINT, SIGTERM or
// SIGHUP arrives while it exists and would end the process (default action;
// ignored signals and a program's own handlers are left as they are);
// temporary folders come from mkdtemp only.

#include <filesystem>
#include <string>
#include <string_view>

namespace artune {

/// One line for --help: how artune treats an output path.
inline constexpr std::string_view kOutputPathHelp =
    "a regular file or new path is replaced atomically, through symlinks; a character device or FIFO "
    "(/dev/stdout) is written in place; a folder, block device or socket is refused";

/// Writes `text` to `path` as described above. InvalidInput (exit 2) for a refused or unreachable path
/// (missing folder, no permission), BackendFailure (exit 3) when writing fails (full disk, /dev/full).
/// Messages read "WHAT: 'PATH': reason" (just "PATH: reason" when `what` is empty).
void write_output_file(const std::string& path, std::string_view text, std::string_view what = "");

/// Checks, before any long work, that write_output_file(path) can succeed: the path is not refused, its
/// folder exists and a file can be created there (probed with a temporary file, so that it also holds for
/// root on a read-only file system). InvalidInput naming `what` otherwise.
void check_output_file(const std::string& path, std::string_view what);

/// Checks, before any long work, that `path` is a folder artune can write files into, or that it can be
/// created (its nearest existing ancestor is a writable folder). InvalidInput naming `what` otherwise.
void check_output_folder(const std::string& path, std::string_view what);

/// Creates the output folder `path` (and its parents) if missing; InvalidInput naming `what` when it
/// cannot be created or is not a folder.
void make_output_folder(const std::string& path, std::string_view what);

/// A private temporary folder (mode 0700, unpredictable name from mkdtemp under $TMPDIR or /tmp),
/// removed with its contents when the object is destroyed.
class TempDir {
 public:
  /// Creates "<tmp>/<prefix>-XXXXXX"; BackendFailure when mkdtemp fails.
  explicit TempDir(std::string_view prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// The folder.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// `text` with control characters (and DEL) written as escapes (\n, \t, \x1b), for messages and
/// labels that echo names, specs or paths taken from input files.
std::string escape_control(std::string_view text);

}  // namespace artune
