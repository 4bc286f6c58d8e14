#include "nccl_tuner/nccl_calibration.hpp"

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/json_reader.hpp"
#include "nccl_tuner/nccl_table.hpp"

namespace artune::nccl_tuner {

namespace {

// The overlay's link kinds (simulator/cost_model.cpp to_string(LinkKind)) for NCCL's classes NVLINK, PCI, NET.
constexpr std::string_view kKinds[nccl_tuning::kHwClasses] = {"nvlink", "pcie", "network"};

nccl_tuning::Calibration read_json(std::string_view text, std::string_view source) {
  const nlohmann::json doc = parse_json_input(text, source);
  const JsonField root(doc, source);
  root.expect_object();
  const std::string profile = root.at("profile").str();
  if (profile != "nccl") {
    root.at("profile").fail("must be \"nccl\", not \"" + profile +
                            "\" (NCCL's constants take a calibration of the nccl profile: artune calibrate "
                            "--backend nccl or --from)");
  }
  double alpha[nccl_tuning::kHwClasses], efficiency[nccl_tuning::kHwClasses];
  for (int k = 0; k < nccl_tuning::kHwClasses; ++k) {
    alpha[k] = nccl_tuning::kProfileAlphaUs[k];
    efficiency[k] = nccl_tuning::kProfileEfficiency[k];
  }
  if (root.has("links")) {
    const JsonField links = root.at("links");
    links.expect_object();
    for (int k = 0; k < nccl_tuning::kHwClasses; ++k) {
      if (!links.has(kKinds[k])) continue;
      const JsonField kind = links.at(kKinds[k]);
      kind.expect_object();
      if (kind.has("alpha_us")) {
        const JsonField a = kind.at("alpha_us");
        alpha[k] = a.num();
        if (!(alpha[k] >= 0 && alpha[k] <= nccl_tuning::kMaxAlphaUs)) {
          a.fail("must be in [0, " + std::to_string(static_cast<int>(nccl_tuning::kMaxAlphaUs)) + "] µs");
        }
      }
      if (kind.has("efficiency")) {
        const JsonField e = kind.at("efficiency");
        efficiency[k] = e.num();
        if (!(efficiency[k] >= nccl_tuning::kMinEfficiency && efficiency[k] <= 1.0)) e.fail("must be in (0, 1]");
      }
    }
  }
  int intra = nccl_tuning::kNvlink;
  if (root.has("nccl_intra")) {
    const std::string v = root.at("nccl_intra").str();
    if (v == "pcie") {
      intra = nccl_tuning::kPci;
    } else if (v != "nvlink") {
      root.at("nccl_intra").fail("must be \"nvlink\" or \"pcie\", not \"" + v + "\"");
    }
  }
  return nccl_tuning::from_overlay(alpha, efficiency, intra);
}

}  // namespace

nccl_tuning::Calibration parse_calibration(std::string_view text, std::string_view source) {
  try {
    return read_json(text, source);
  } catch (const InvalidInput& e) {
    throw TableError(e.what());
  }
}

nccl_tuning::Calibration read_calibration(const std::string& path) {
  return parse_calibration(read_regular_file(path), path);
}

}  // namespace artune::nccl_tuner
