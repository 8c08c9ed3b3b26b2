// The `shoal` CLI's commands. Each Register* adds one subcommand to the app; the command runs
// from its callback and sets the exit code through the returned reference.
#pragma once

#include <CLI/CLI.hpp>

namespace shoal::cli {

void RegisterDemo(CLI::App& app, int& exit_code);
void RegisterBenchIngest(CLI::App& bench, int& exit_code);
void RegisterTorture(CLI::App& app, int& exit_code);
void RegisterBenchPause(CLI::App& bench, int& exit_code);
void RegisterLoadVerify(CLI::App& app, int& exit_code);

// Percentile of a sorted vector (nearest rank), 0 for an empty one.
double Percentile(const std::vector<double>& sorted, double p);

}  // namespace shoal::cli
