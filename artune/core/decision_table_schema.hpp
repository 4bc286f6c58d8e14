#pragma once
// The decision table's file identity, shared by its writer and reader in the tuner (tuner/decision_table.hpp)
// and by the NCCL tuner plugin's own reader (nccl_tuner/nccl_table.hpp), which links no artune library. The
// fields themselves are documented in docs/commands.md (the decision table) and docs/nccl-plugin.md.

#include <string_view>

namespace artune {

/// The value of the "schema" field that marks a decision table.
inline constexpr std::string_view kDecisionTableSchema = "artune.decision_table";
/// The schema version of a file holding one (type, op) table; written for single tables, read by the tuner and
/// by the plugin.
inline constexpr int kDecisionTableSchemaVersion = 1;
/// The schema version of a file holding several (type, op) tables (`autotune -d float,half --op sum,avg`): the
/// common header plus "tables": [version-1 tables]. Written only when there is more than one; the plugin reads
/// only version 1 (one table per communicator's type and op is what NCCL asks it for).
inline constexpr int kDecisionTableMultiSchemaVersion = 2;

}  // namespace artune
