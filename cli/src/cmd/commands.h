// The `shoal` CLI's commands. Each Register* adds one subcommand to the app; the command runs
// from its callback and sets the exit code through the returned reference.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "shoal/common/status.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/local_platform.h"

namespace shoal::cli {

void RegisterDemo(CLI::App& app, int& exit_code);
void RegisterBenchIngest(CLI::App& bench, int& exit_code);
void RegisterTorture(CLI::App& app, int& exit_code);
void RegisterBenchPause(CLI::App& bench, int& exit_code);
void RegisterBenchDrain(CLI::App& bench, int& exit_code);
void RegisterBenchPeers(CLI::App& bench, int& exit_code);
void RegisterLoadVerify(CLI::App& app, int& exit_code);
void RegisterSimulate(CLI::App& app, int& exit_code);
void RegisterControl(CLI::App& app, int& exit_code);
void RegisterUp(CLI::App& app, int& exit_code);
void RegisterWaitDrained(CLI::App& app, int& exit_code);
void RegisterDeleteGroup(CLI::App& app, int& exit_code);
void RegisterConsole(CLI::App& app, int& exit_code);

// The whole file, or NotFound naming the path.
Result<std::string> ReadTextFile(const std::string& path);
// A token file's token: the file without its trailing newline and blanks.
Result<std::string> ReadTokenFile(const std::string& path);
// This program's path (/proc/self/exe): the `shoal` that pods run as their consumer.
std::string SelfPath();

// The local platform's options that follow from a topic's spec: topic, state directory, the
// sidecars' fsync and retention, and `shoal` itself as the pods' consumer.
control::LocalPlatformOptions PlatformOptionsFor(const TopicSpec& spec, std::string state_dir);

// Percentile of a sorted vector (nearest rank), 0 for an empty one.
double Percentile(const std::vector<double>& sorted, double p);

}  // namespace shoal::cli
