#pragma once
// What the NCCL tuner plugin needs of a calibration overlay written by `artune calibrate` (`--backend nccl`
// or `--from RUN.log…`): the nccl profile's per-link-kind per-step latency α and efficiency (links.nvlink,
// links.pcie, links.network) and the class NCCL's rings use inside the machine ("nccl_intra"), read as
// nccl_tuning::Calibration (artune/simulator/nccl_tuning.hpp). Like the table reader, it compiles in only
// core's JSON reading; every failure is a TableError naming the file and the field.

#include <string>
#include <string_view>

#include "artune/simulator/nccl_tuning.hpp"

namespace artune::nccl_tuner {

/// Parses an overlay's JSON text; TableError "SOURCE: PATH: reason" when it is not an nccl-profile overlay
/// (another "profile", a link kind's α or efficiency missing its number or out of range, "nccl_intra" not
/// "nvlink" or "pcie").
nccl_tuning::Calibration parse_calibration(std::string_view text, std::string_view source);
/// Reads a regular file (read_regular_file) and parses it.
nccl_tuning::Calibration read_calibration(const std::string& path);

}  // namespace artune::nccl_tuner
