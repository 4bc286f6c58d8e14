#pragma once
// Subcommands of the `artune` command; each file in cli/ registers one.

#include <CLI/CLI.hpp>

namespace artune::cli {

/// `artune topo show|import|discover`.
void add_topo_command(CLI::App& app);
/// `artune topo discover` (attached under the `topo` subcommand by cmd_topo.cpp).
void add_topo_discover_command(CLI::App* topo);
/// `artune plan`.
void add_plan_command(CLI::App& app);
/// `artune simulate`.
void add_simulate_command(CLI::App& app);
/// `artune run`.
void add_run_command(CLI::App& app);
/// `artune alloc`.
void add_alloc_command(CLI::App& app);
/// `artune bound`.
void add_bound_command(CLI::App& app);
/// `artune autotune`.
void add_autotune_command(CLI::App& app);
/// `artune calibrate`.
void add_calibrate_command(CLI::App& app);
/// `artune check`.
void add_check_command(CLI::App& app);

}  // namespace artune::cli
