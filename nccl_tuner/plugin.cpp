// libnccl-tuner-artune.so: NCCL's tuner plugin steering NCCL's choice
// (algorithm × protocol, and channels where the table names them) for
// all-reduce, all-gather and reduce-scatter by decision tables written by
// `artune autotune --target nccl [--collective …]`, named by
// ARTUNE_TUNER_TABLE (one path, or several separated by ':', one table per
// collective).
//
// NCCL loads it with NCCL_TUNER_PLUGIN=artune (or a path) and looks up the
// ncclTunerPlugin_v* symbols by name (NVIDIA/nccl src/plugin/tuner.cc). The
// plugin lives inside someone else's training job, so it never throws across
// the C boundary, never aborts, and always answers success: a missing,
// corrupt or mismatched table (or two tables for one collective) logs one
// warning through NCCL's logger and leaves every cost table alone (returning an error from init would fail
// the communicator's creation, NVIDIA/nccl src/init.cc).
//
// With ARTUNE_TUNER_CALIBRATION naming a calibration overlay (artune calibrate --backend nccl or --from), init
// (tuner interface v5, NCCL 2.28+) also writes the calibration into the tuning constants NCCL hands it
// (baseLatencies, hwLatencies: nccl_tuning.hpp), so that NCCL's own model is calibrated at every size and
// collective, the table's ranges still overriding the pick where they name one. A corrupt overlay logs one
// warning and leaves NCCL's constants untouched.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "nccl_tuner/nccl_calibration.hpp"
#include "nccl_tuner/nccl_table.hpp"
#include "nccl_tuner/tuner_abi.h"

namespace {

using artune::nccl_tuner::Table;

/// The environment variable naming the tables: paths separated by ':'.
constexpr const char* kTableEnv = "ARTUNE_TUNER_TABLE";
/// The environment variable naming a calibration overlay for NCCL's tuning constants.
constexpr const char* kCalibrationEnv = "ARTUNE_TUNER_CALIBRATION";
constexpr const char* kName = "artune";
/// Ranges listed in the init log line (a table of a few dozen sizes has a handful).
constexpr std::size_t kRangesLogged = 16;
/// Table slots, indexed by artuneNcclFunc (broadcast … all-reduce).
constexpr int kCollectiveSlots = artuneNcclFuncAllReduce + 1;

/// One communicator's state.
struct Context {
  bool active = false;                  ///< every named table was read and fits this communicator
  std::vector<Table> tables;            ///< the tables, at most one per collective
  int slot[kCollectiveSlots] = {-1, -1, -1, -1, -1};  ///< per artuneNcclFunc: index into tables, -1 = none
};

void log_line(artuneNcclLogger log, artuneNcclLogLevel level, const std::string& text) {
  // The text is passed as an argument, never as the format: paths and JSON errors may hold '%'.
  if (log != nullptr) log(level, ARTUNE_NCCL_LOG_TUNING, __FILE__, __LINE__, "%s", text.c_str());
}

/// The one warning of a communicator whose tables are not used; allocates nothing (it runs in catch handlers).
void warn_kept(artuneNcclLogger log, const char* reason) noexcept {
  if (log != nullptr) {
    log(artuneNcclLogWarn, ARTUNE_NCCL_LOG_TUNING, __FILE__, __LINE__, "artune tuner: %s; NCCL's own choices kept",
        reason);
  }
}

/// The paths of ARTUNE_TUNER_TABLE's value, split at ':' (empty entries are skipped).
std::vector<std::string> table_paths(const std::string& value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t colon = std::min(value.find(':', start), value.size());
    if (colon > start) out.push_back(value.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

/// One line per table with its ranges, so that NCCL's TUNING log can be checked against the table.
std::string describe(const std::string& path, const Table& table, std::size_t ranks, std::size_t nodes) {
  std::string line = "artune tuner: " + path + ": " + std::to_string(table.ranges.size()) + " " +
                     artune::nccl_tuner::collective_name(table.collective) + " size range(s) for " +
                     std::to_string(ranks) + " ranks on " + std::to_string(nodes) + " node(s):";
  std::size_t shown = 0;
  for (const auto& r : table.ranges) {
    if (++shown > kRangesLogged) {
      line += " …";
      break;
    }
    // Appended piecewise: g++ 12 warns falsely (-Wrestrict, GCC bug 105329) on " " + std::string temporaries.
    line += ' ';
    line += std::to_string(r.min_bytes);
    line += '-';
    line += std::to_string(r.max_bytes);
    line += ' ';
    line += r.spec;
  }
  return line;
}

/// The calibration overlay's path ("" when ARTUNE_TUNER_CALIBRATION is unset or empty).
std::string calibration_path() {
  const char* value = std::getenv(kCalibrationEnv);
  return value == nullptr ? std::string() : std::string(value);
}

/// "+1.25" / "-0.5" for a log line.
std::string signed_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.3g", v);
  return buf;
}

/// Writes the calibration overlay into NCCL's constants (v5: init's in/out argument): all or nothing, one log
/// line either way.
void calibrate_constants(artuneNcclTunerConstants* constants, std::size_t ranks, std::size_t nodes,
                         artuneNcclLogger log) noexcept {
  try {
    const std::string path = calibration_path();
    if (path.empty()) return;
    const artune::nccl_tuning::Calibration c = artune::nccl_tuner::read_calibration(path);
    if (constants == nullptr) {
      warn_kept(log, "ARTUNE_TUNER_CALIBRATION: this NCCL hands the tuner no constants (interface v5, NCCL 2.28+)");
      return;
    }
    artuneNcclTunerConstants written = *constants;  // NCCL's own values, whatever its release set them to
    const int machines = static_cast<int>(nodes);
    artune::nccl_tuning::apply(written.baseLatencies, written.hwLatencies, c, machines);
    *constants = written;
    const double share = artune::nccl_tuning::bandwidth_share(c, machines);
    const char* share_of = nodes > 1 ? "network" : c.intra == artune::nccl_tuning::kPci ? "PCI" : "NVLink";
    log_line(log, artuneNcclLogInfo,
             "artune tuner: " + path + ": NCCL tuning constants calibrated for " + std::to_string(ranks) +
                 " ranks on " + std::to_string(nodes) + " node(s): per-step latency NVLink " +
                 signed_text(c.shift_us[0]) + " us, PCI " + signed_text(c.shift_us[1]) + " us, network " +
                 signed_text(c.shift_us[2]) + " us; every latency x" + signed_text(share).substr(1) +
                 " (the " + share_of + " bandwidth share)");
  } catch (const std::exception& e) {
    if (log != nullptr) {
      log(artuneNcclLogWarn, ARTUNE_NCCL_LOG_TUNING, __FILE__, __LINE__,
          "artune tuner: %s; NCCL's tuning constants kept", e.what());
    }
  } catch (...) {
    warn_kept(log, "unexpected error reading ARTUNE_TUNER_CALIBRATION");
  }
}

/// Reads and checks the tables for a communicator; a context that passes everything through on any problem.
Context* make_context(std::size_t ranks, std::size_t nodes, artuneNcclLogger log) noexcept {
  Context* ctx = new (std::nothrow) Context;
  if (ctx == nullptr) {
    warn_kept(log, "out of memory");
    return nullptr;
  }
  try {
    const char* value = std::getenv(kTableEnv);
    const std::vector<std::string> paths = table_paths(value == nullptr ? "" : value);
    if (paths.empty()) {
      // A calibration alone is a use of its own: NCCL's (calibrated) model picks everywhere.
      if (calibration_path().empty()) warn_kept(log, "ARTUNE_TUNER_TABLE is not set");
      return ctx;
    }
    std::vector<std::string> lines;
    for (const std::string& path : paths) {
      Table table = artune::nccl_tuner::read_table(path);
      artune::nccl_tuner::check_fits(table, ranks, nodes, path);
      int& slot = ctx->slot[table.collective];
      if (slot >= 0) {
        throw artune::nccl_tuner::TableError(path + ": a second " +
                                             artune::nccl_tuner::collective_name(table.collective) +
                                             " table in ARTUNE_TUNER_TABLE (one table per collective)");
      }
      slot = static_cast<int>(ctx->tables.size());
      lines.push_back(describe(path, table, ranks, nodes));
      ctx->tables.push_back(std::move(table));
    }
    ctx->active = true;
    for (const std::string& line : lines) log_line(log, artuneNcclLogInfo, line);
  } catch (const std::exception& e) {
    ctx->active = false;  // whatever failed, the warning below must hold
    warn_kept(log, e.what());
  } catch (...) {
    ctx->active = false;
    warn_kept(log, "unexpected error");
  }
  return ctx;
}

/// The range of `coll`'s table for a size, or nullptr when this call passes through.
const artune::nccl_tuner::Range* range_for(void* context, artuneNcclFunc coll, std::size_t bytes) noexcept {
  const auto* ctx = static_cast<const Context*>(context);
  if (ctx == nullptr || !ctx->active || coll < 0 || coll >= kCollectiveSlots || ctx->slot[coll] < 0) return nullptr;
  return &ctx->tables[static_cast<std::size_t>(ctx->slot[coll])].lookup(bytes);
}

artuneNcclResult init_v5(void** context, uint64_t /*comm_id*/, size_t ranks, size_t nodes, artuneNcclLogger log,
                         artuneNcclNvlDomainInfo* /*nvl*/, artuneNcclTunerConstants* constants) {
  calibrate_constants(constants, ranks, nodes, log);
  if (context != nullptr) *context = make_context(ranks, nodes, log);
  return artuneNcclSuccess;
}

artuneNcclResult init_v2(size_t ranks, size_t nodes, artuneNcclLogger log, void** context) {
  // Interfaces v2–v4 carry no constants: a calibration cannot reach NCCL's model there (said once).
  calibrate_constants(nullptr, ranks, nodes, log);
  if (context != nullptr) *context = make_context(ranks, nodes, log);
  return artuneNcclSuccess;
}

artuneNcclResult get_coll_info(void* context, artuneNcclFunc coll, size_t bytes, int /*pipe_ops*/, float** costs,
                               int num_algo, int num_proto, int /*reg_buff*/, int* channels) {
  if (const auto* range = range_for(context, coll, bytes)) {
    // NCCL passes its float[numAlgo][numProto] array cast to float** (src/enqueue.cc).
    const bool applied =
        artune::nccl_tuner::apply_pick(range->pick, reinterpret_cast<float*>(costs), num_algo, num_proto);
    // The pick's channel count, only with the pick itself: a positive nChannels replaces NCCL's channel count for
    // this collective, 0 leaves it (src/enqueue.cc ncclGetAlgoInfo).
    if (applied && range->pick.channels > 0 && channels != nullptr) *channels = range->pick.channels;
  }
  return artuneNcclSuccess;
}

artuneNcclResult get_coll_info_v3(void* context, artuneNcclFunc coll, size_t bytes, int pipe_ops, float** costs,
                                  int num_algo, int num_proto, int* channels) {
  return get_coll_info(context, coll, bytes, pipe_ops, costs, num_algo, num_proto, 0, channels);
}

artuneNcclResult get_coll_info_v2(void* context, artuneNcclFunc coll, size_t bytes, int collnet_support,
                                  int nvls_support, int /*pipe_ops*/, int* algorithm, int* protocol,
                                  int* channels) {
  (void)collnet_support;
  const auto* range = range_for(context, coll, bytes);
  // v2 may set an algorithm only together with a protocol; NVLS needs NCCL's nvlsSupport.
  if (range == nullptr || range->pick.algo < 0 || range->pick.proto < 0 || algorithm == nullptr ||
      protocol == nullptr) {
    return artuneNcclSuccess;
  }
  const bool nvls = range->pick.algo == ARTUNE_NCCL_ALGO_NVLS || range->pick.algo == ARTUNE_NCCL_ALGO_NVLS_TREE;
  if (nvls && nvls_support == 0) return artuneNcclSuccess;
  *algorithm = range->pick.algo;
  *protocol = range->pick.proto;
  if (range->pick.channels > 0 && channels != nullptr) *channels = range->pick.channels;
  return artuneNcclSuccess;
}

artuneNcclResult finalize(void* context) {
  delete static_cast<Context*>(context);
  return artuneNcclSuccess;
}

}  // namespace

// The symbols NCCL looks up by name (not const: NCCL takes them as plain struct pointers). Only these leave
// the library, which is built with hidden visibility.
extern "C" {

__attribute__((visibility("default")))
artuneNcclTunerV6 ncclTunerPlugin_v6 = {kName, init_v5, get_coll_info, finalize, nullptr};
__attribute__((visibility("default"))) artuneNcclTunerV5 ncclTunerPlugin_v5 = {kName, init_v5, get_coll_info, finalize};
__attribute__((visibility("default"))) artuneNcclTunerV4 ncclTunerPlugin_v4 = {kName, init_v2, get_coll_info, finalize};
__attribute__((visibility("default")))
artuneNcclTunerV3 ncclTunerPlugin_v3 = {kName, init_v2, get_coll_info_v3, finalize};
__attribute__((visibility("default")))
artuneNcclTunerV2 ncclTunerPlugin_v2 = {kName, init_v2, get_coll_info_v2, finalize};

}  // extern "C"
