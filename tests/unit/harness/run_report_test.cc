#include "shoal/harness/run_report.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/temp_dir.h"

namespace shoal::harness {
namespace {

// A flash sale, one sample a second for 180 s: 1,000 events/s, 10x from 60 s to 120 s, then
// 1,000 again. Partitions 2 -> 16 at 62 s -> 2 at 130 s; pods 1 -> 8 -> 1 alike. The lag rises
// by 1,000 a second from 60 s to its peak of 8,000 at 68 s and falls back to 0 by 76 s.
RunSummary FlashSale(std::string name = "dynamic") {
  RunSummary run;
  run.name = std::move(name);
  run.topic = "orders";
  run.profile = "flash-sale";
  run.base_rate = 1000;
  run.surge_factor = 10;
  run.surge_start_s = 60;
  run.surge_end_s = 120;
  run.duration_s = 180;
  run.command = "shoal up examples/flash-sale.yaml --profile flash-sale --duration 180";
  for (int t = 0; t < 180; ++t) {
    RunSample s;
    s.t = t;
    s.arrival_rate = (t >= 60 && t < 120) ? 10000 : 1000;
    s.consumed_rate = s.arrival_rate;
    const bool scaled = t >= 62 && t < 130;
    s.partitions = scaled ? 16 : 2;
    s.pods = scaled ? 8 : 1;
    s.ready_pods = s.pods;
    if (t >= 60 && t <= 68) s.lag = (t - 60) * 1000.0;
    if (t > 68 && t <= 76) s.lag = (76 - t) * 1000.0;
    s.produce_p99_ms = 4;
    run.samples.push_back(s);
  }
  run.decisions = {
      {61, "split,pods_up", "consumer lag 1,000 above its target 500 and growing", 2, 16, 1, 8},
      {128, "merge,pods_down", "replicas 8 -> 1: the highest recommendation over the last 60 s", 16,
       2, 8, 1},
  };
  run.verify.acked = 1234567;
  run.verify.seen = 1234567;
  return run;
}

// Like FlashSale, but nothing scales and the lag grows by 1,000 a second from the surge on.
RunSummary GrowingLag() {
  RunSummary run = FlashSale("static-baseline");
  run.decisions.clear();
  for (auto& s : run.samples) {
    s.partitions = 2;
    s.pods = 1;
    s.ready_pods = 1;
    s.lag = s.t >= 60 ? (s.t - 60) * 1000.0 : 0;
  }
  return run;
}

RunSummary StaticPeak(uint32_t partitions, double peak_lag) {
  RunSummary run = FlashSale("static-peak");
  run.decisions.clear();
  for (auto& s : run.samples) {
    s.partitions = partitions;
    s.pods = 8;
    s.ready_pods = 8;
    s.lag = s.t == 65 ? peak_lag : 0;
  }
  return run;
}

// The line of a Markdown document that contains `needle` (empty if none).
std::string LineWith(const std::string& doc, std::string_view needle) {
  std::istringstream in(doc);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

size_t Count(const std::string& s, std::string_view needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RunReportFigures, FlashSaleScalesUpAndBackDown) {
  const RunFigures f = ComputeFigures(FlashSale());
  EXPECT_EQ(f.peak_lag, 8000);
  EXPECT_EQ(f.lag_peak_after_surge_s, 8);
  // 62 s at 2, 68 s at 16, 50 s at 2.
  EXPECT_EQ(f.partition_seconds, 62 * 2 + 68 * 16 + 50 * 2);
  EXPECT_EQ(f.pod_seconds, 62 * 1 + 68 * 8 + 50 * 1);
  EXPECT_EQ(f.baseline_partitions, 2u);
  EXPECT_EQ(f.max_partitions, 16u);
  EXPECT_EQ(f.final_partitions, 2u);
  EXPECT_EQ(f.baseline_pods, 1u);
  EXPECT_EQ(f.max_pods, 8u);
  EXPECT_EQ(f.final_pods, 1u);
  EXPECT_TRUE(f.scaled_up);
  EXPECT_TRUE(f.scaled_down);
  EXPECT_EQ(f.produce_p99_ms, 4);
  EXPECT_EQ(f.acked, 1234567u);
  EXPECT_EQ(f.lost, 0u);
}

TEST(RunReportFigures, GrowingLagPeaksAtTheEndOfTheWindow) {
  const RunFigures f = ComputeFigures(GrowingLag());
  // The window is [60, 120 + 30]: the lag is highest at its last sample.
  EXPECT_EQ(f.lag_peak_after_surge_s, 90);
  EXPECT_EQ(f.peak_lag, 119000);  // at t = 179, after the window
  EXPECT_FALSE(f.scaled_up);
  EXPECT_FALSE(f.scaled_down);
}

// Lag that stays within what consumers hold in flight (a quarter second of the surge's 10,000
// events/s here, or the lag before the surge) never grew, wherever its noise peaks.
TEST(RunReportFigures, LagWithinTheInFlightFloorNeverGrew) {
  RunSummary run = FlashSale();
  for (auto& s : run.samples) {
    s.lag = s.t == 75 ? 2400 : (s.t == 10 ? 900 : 100);  // noise, highest 15 s into the surge
  }
  RunFigures f = ComputeFigures(run);
  EXPECT_EQ(f.lag_peak_after_surge_s, 0);
  const std::string line = LineWith(SummaryMarkdown(run, f), "lag stops growing");
  EXPECT_NE(line.find("never grew"), std::string::npos) << line;
  EXPECT_NE(line.find("PASS"), std::string::npos) << line;
  // Above the floor it is growth: the peak's time counts.
  for (auto& s : run.samples) {
    if (s.t == 75) s.lag = 2600;
  }
  f = ComputeFigures(run);
  EXPECT_EQ(f.lag_peak_after_surge_s, 15);
  EXPECT_NE(LineWith(SummaryMarkdown(run, f), "lag stops growing").find("PASS"), std::string::npos);
  for (auto& s : run.samples) {
    if (s.t == 75) s.lag = 100;
    if (s.t == 80) s.lag = 2600;  // 20 s into the surge
  }
  f = ComputeFigures(run);
  EXPECT_EQ(f.lag_peak_after_surge_s, 20);
  EXPECT_NE(LineWith(SummaryMarkdown(run, f), "lag stops growing").find("FAIL"), std::string::npos);
}

TEST(RunReportFigures, StayingScaledUpIsNotScalingDown) {
  RunSummary run = FlashSale();
  for (auto& s : run.samples) {
    if (s.t >= 62) s.partitions = 16;  // partitions stay up, pods come back
  }
  const RunFigures f = ComputeFigures(run);
  EXPECT_TRUE(f.scaled_up);
  EXPECT_FALSE(f.scaled_down);
  EXPECT_NE(LineWith(SummaryMarkdown(run, f), "return toward the baseline").find("FAIL"),
            std::string::npos);
}

TEST(RunReportFigures, ProduceP99IsTheNearestRankOverNonZeroSeconds) {
  RunSummary run;
  for (int i = 0; i < 300; ++i) {
    RunSample s;
    s.t = i;
    s.produce_p99_ms = i < 200 ? 0 : i - 199;  // 1..100 ms, after 200 idle seconds
    run.samples.push_back(s);
  }
  EXPECT_EQ(ComputeFigures(run).produce_p99_ms, 99);
}

TEST(RunReportFigures, NoSurgeAndNoSamples) {
  RunSummary run = FlashSale();
  run.surge_start_s = run.surge_end_s = 0;
  EXPECT_EQ(ComputeFigures(run).lag_peak_after_surge_s, -1);

  const RunFigures empty = ComputeFigures(RunSummary{});
  EXPECT_EQ(empty.lag_peak_after_surge_s, -1);
  EXPECT_EQ(empty.partition_seconds, 0);
  EXPECT_FALSE(empty.scaled_up);
}

TEST(RunReportFigures, UnevenSpacingWeighsEachSampleUntilTheNext) {
  RunSummary run;
  for (auto [t, p] : {std::pair{0.0, 2u}, {1.0, 4u}, {3.0, 4u}, {4.0, 2u}}) {
    RunSample s;
    s.t = t;
    s.partitions = p;
    run.samples.push_back(s);
  }
  // 2*1 + 4*2 + 4*1 + 2*1 (the last sample counts the spacing before it).
  EXPECT_EQ(ComputeFigures(run).partition_seconds, 16);
}

TEST(RunReportMarkdown, FlashSaleSummaryPasses) {
  const RunSummary run = FlashSale();
  const std::string md = SummaryMarkdown(run, ComputeFigures(run));
  EXPECT_NE(md.find("orders"), std::string::npos);
  EXPECT_NE(md.find("flash-sale"), std::string::npos);
  EXPECT_NE(md.find(run.command), std::string::npos);
  EXPECT_NE(md.find("**Verifier: PASS**"), std::string::npos);
  EXPECT_NE(md.find("1,234,567"), std::string::npos);
  EXPECT_NE(md.find("10,000 events/s"), std::string::npos);
  EXPECT_NE(md.find("](chart.svg)"), std::string::npos);
  EXPECT_EQ(md.find("compare.md"), std::string::npos);

  const std::string lag = LineWith(md, "lag stops growing within 15 s");
  EXPECT_NE(lag.find("8.0 s"), std::string::npos) << lag;
  EXPECT_NE(lag.find("PASS"), std::string::npos) << lag;
  const std::string back = LineWith(md, "return toward the baseline");
  EXPECT_NE(back.find("2 -> 16 -> 2"), std::string::npos) << back;
  EXPECT_NE(back.find("PASS"), std::string::npos) << back;

  const std::string decision = LineWith(md, "| 61.0 |");
  EXPECT_NE(decision.find("2 -> 16"), std::string::npos) << decision;
  EXPECT_NE(decision.find("split,pods_up"), std::string::npos) << decision;
  EXPECT_NE(decision.find("above its target"), std::string::npos) << decision;
}

TEST(RunReportMarkdown, GrowingLagFailsTheLagCheck) {
  const RunSummary run = GrowingLag();
  const std::string md = SummaryMarkdown(run, ComputeFigures(run));
  const std::string lag = LineWith(md, "lag stops growing within 15 s");
  EXPECT_NE(lag.find("90.0 s"), std::string::npos) << lag;
  EXPECT_NE(lag.find("FAIL"), std::string::npos) << lag;
  // Never scaled: the return check does not apply.
  EXPECT_NE(LineWith(md, "return toward the baseline").find("n/a"), std::string::npos);
}

TEST(RunReportMarkdown, LostOrReorderedEventsFailTheVerifier) {
  RunSummary run = FlashSale();
  run.verify.lost = 3;
  run.verify.examples = {"p1/user_7 seq 12 | acked, never seen"};
  std::string md = SummaryMarkdown(run, ComputeFigures(run));
  EXPECT_NE(md.find("**Verifier: FAIL**"), std::string::npos);
  EXPECT_NE(md.find("seq 12 \\| acked"), std::string::npos);  // a '|' does not break the list

  run.verify.lost = 0;
  run.verify.reordered = 1;
  EXPECT_NE(SummaryMarkdown(run, ComputeFigures(run)).find("**Verifier: FAIL**"),
            std::string::npos);

  run.verify.reordered = 0;
  run.verify.duplicated = 5;  // reported, not failed
  EXPECT_NE(SummaryMarkdown(run, ComputeFigures(run)).find("**Verifier: PASS**"),
            std::string::npos);
}

// A chaos run (`shoal up --chaos`): orders-3 killed at 80 s, its partitions failed over at
// 82.5 s; another failover (of orders-5, not killed) at 90 s.
RunSummary Chaos() {
  RunSummary run = FlashSale();
  run.chaos = true;
  run.kills_planned = 1;
  run.kills = {{80, "orders-3", 4242, 4}};
  run.failovers = {{82.5, {"orders-3"}, 4, 2.4}, {90, {"orders-5"}, 2, 2.1}};
  return run;
}

TEST(RunReportChaos, AKilledLeaderFailedOverPasses) {
  const RunSummary run = Chaos();
  const RunFigures f = ComputeFigures(run);
  EXPECT_EQ(f.kills, 1u);
  EXPECT_EQ(f.failovers, 2u);
  EXPECT_EQ(f.failed_over_partitions, 6u);
  EXPECT_EQ(f.kills_failed_over, 1u);
  EXPECT_DOUBLE_EQ(f.failover_s, 2.4);
  EXPECT_DOUBLE_EQ(f.kill_to_failover_s, 2.5);
  EXPECT_TRUE(f.chaos_failed_over);
  const std::string md = SummaryMarkdown(run, f);
  EXPECT_NE(md.find("**Run: PASS** (chaos)"), std::string::npos) << md;
  EXPECT_NE(md.find("**Chaos: PASS**"), std::string::npos) << md;
  const std::string kill = LineWith(md, "| t=80.0 s | orders-3 |");
  EXPECT_NE(kill.find("4242"), std::string::npos) << kill;
  EXPECT_NE(kill.find("t=82.5 s (2.5 s after the kill)"), std::string::npos) << kill;
  EXPECT_NE(kill.find("2.4 s"), std::string::npos) << kill;
  EXPECT_NE(LineWith(md, "| t=90.0 s | orders-5 |"), "") << md;
  EXPECT_NE(LineWith(md, "every killed leader's partitions are failed over").find("PASS"),
            std::string::npos);
}

TEST(RunReportChaos, NoFailoverOfTheKilledPodOrNoKillFails) {
  RunSummary run = Chaos();
  run.failovers.erase(run.failovers.begin());  // only orders-5's: not the killed pod
  RunFigures f = ComputeFigures(run);
  EXPECT_FALSE(f.chaos_failed_over);
  EXPECT_EQ(f.kills_failed_over, 0u);
  std::string md = SummaryMarkdown(run, f);
  EXPECT_NE(md.find("**Run: FAIL** (chaos)"), std::string::npos) << md;
  EXPECT_NE(md.find("**Chaos: FAIL**"), std::string::npos) << md;
  EXPECT_NE(LineWith(md, "| t=80.0 s | orders-3 |").find("not failed over"), std::string::npos);
  EXPECT_NE(LineWith(md, "every killed leader's partitions are failed over").find("FAIL"),
            std::string::npos);

  // A failover of the pod before its kill is not its failover.
  run.failovers = {{70, {"orders-3"}, 4, 2.0}};
  EXPECT_FALSE(ComputeFigures(run).chaos_failed_over);

  // Fewer kills made than planned fails too, and so does none.
  run = Chaos();
  run.kills_planned = 2;
  md = SummaryMarkdown(run, ComputeFigures(run));
  EXPECT_NE(md.find("**Chaos: FAIL**: 1 of the 2 kills planned were made"), std::string::npos)
      << md;
  run.kills.clear();
  run.failovers.clear();
  md = SummaryMarkdown(run, ComputeFigures(run));
  EXPECT_NE(md.find("**Chaos: FAIL**"), std::string::npos) << md;
  EXPECT_NE(md.find("no failover in this run"), std::string::npos) << md;

  // Lost events fail a chaos run whose failover went well.
  run = Chaos();
  run.verify.lost = 1;
  EXPECT_NE(SummaryMarkdown(run, ComputeFigures(run)).find("**Run: FAIL** (chaos)"),
            std::string::npos);
}

TEST(RunReportChaos, ARunWithoutChaosSaysNothingOfIt) {
  const RunSummary run = FlashSale();
  const std::string md = SummaryMarkdown(run, ComputeFigures(run));
  EXPECT_EQ(md.find("Chaos"), std::string::npos);
  EXPECT_EQ(md.find("**Run:"), std::string::npos);
  EXPECT_EQ(LineWith(md, "failed over"), "");
}

TEST(RunReportMarkdown, ReasonsCannotBreakTheDecisionsTable) {
  RunSummary run = FlashSale();
  run.decisions[0].reason = "a | b <script> c\nd";
  const std::string md = SummaryMarkdown(run, ComputeFigures(run));
  const std::string row = LineWith(md, "| 61.0 |");
  EXPECT_NE(row.find("a \\| b &lt;script> c d |"), std::string::npos) << row;
}

TEST(RunReportSvg, IsSelfContainedBalancedAndEscaped) {
  RunSummary run = FlashSale();
  run.decisions[0].reason = "lag <&> \"target\"";
  const std::string svg = ChartSvg(run);
  ASSERT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("width=\"900\" height=\"700\""), std::string::npos);

  EXPECT_EQ(Count(svg, "<svg"), 1u);
  EXPECT_EQ(Count(svg, "</svg>"), 1u);
  EXPECT_EQ(Count(svg, "<g>") + Count(svg, "<g "), Count(svg, "</g>"));
  EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
  EXPECT_EQ(Count(svg, "<title>"), Count(svg, "</title>"));
  EXPECT_EQ(Count(svg, "class=\"panel\""), 4u);
  // One tooltip per decision, one for the surge in each panel, one for the document.
  EXPECT_EQ(Count(svg, "<title>"), run.decisions.size() + 4 + 1);

  EXPECT_NE(svg.find("lag &lt;&amp;&gt; &quot;target&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
  EXPECT_EQ(svg.find("http://", svg.find('>')), std::string::npos);  // only the xmlns
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("@import"), std::string::npos);

  for (const char* unit : {"events/s", ">partitions<", ">pods<", ">events<", "(s)"}) {
    EXPECT_NE(svg.find(unit), std::string::npos) << unit;
  }
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(RunReportSvg, EmptyRunIsStillAChart) {
  const std::string svg = ChartSvg(RunSummary{});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("no samples"), std::string::npos);
  EXPECT_EQ(Count(svg, "<g>") + Count(svg, "<g "), Count(svg, "</g>"));
}

TEST(RunReportCompare, DynamicWinsTheTradeOff) {
  // static-peak: 16 partitions throughout (2,880 partition-seconds), peak lag 5,000.
  const std::vector<RunSummary> runs = {GrowingLag(), StaticPeak(16, 5000), FlashSale()};
  const std::string md = CompareMarkdown(runs);
  EXPECT_NE(md.find("| run | partitions (min-max) | pods (min-max) | lag at peak |"),
            std::string::npos);
  const std::string dynamic = LineWith(md, "[dynamic](chart-dynamic.svg)");
  EXPECT_NE(dynamic.find("| 2-16 | 1-8 | 8,000 | 16.0 s after the surge began | 64,000 | 4.0 | 0 | "
                         "0 | 1,312 | 656 |"),
            std::string::npos)
      << dynamic;
  EXPECT_NE(LineWith(md, "[static-peak](chart-static-peak.svg)").find("| 16-16 |"),
            std::string::npos);
  EXPECT_NE(LineWith(md, "[static-baseline]").find("119,000"), std::string::npos);

  const std::string ps = LineWith(md, "at most half the partition-seconds");
  EXPECT_NE(ps.find("ratio 0.46"), std::string::npos) << ps;
  EXPECT_NE(ps.find("PASS"), std::string::npos) << ps;
  const std::string lag = LineWith(md, "no worse than twice");
  EXPECT_NE(lag.find("ratio 1.60"), std::string::npos) << lag;
  EXPECT_NE(lag.find("PASS"), std::string::npos) << lag;
  // static-peak: 16 partitions outside the surge (1,904 partition-seconds) against dynamic's 378.
  const std::string idle = LineWith(md, "outside the surge");
  EXPECT_NE(idle.find("ratio 5.04 (1,904 / 378 partition-seconds)"), std::string::npos) << idle;
  EXPECT_NE(idle.find("PASS"), std::string::npos) << idle;
  // The baseline's lag: 0 at the surge's start, 60,000 at its end: 7.5 times dynamic's 8,000.
  const std::string grows = LineWith(md, "grows through the surge");
  EXPECT_NE(grows.find("ratio 7.50 (0 at the surge's start, 60,000 at its end"), std::string::npos)
      << grows;
  EXPECT_NE(grows.find("FAIL"), std::string::npos) << grows;
}

TEST(RunReportCompare, AnUnannouncedSurgeIsJudgedByHowFastItsBacklogGoes) {
  RunSummary dyn = FlashSale();
  dyn.announced = false;
  const RunFigures f = ComputeFigures(dyn);
  EXPECT_DOUBLE_EQ(f.lag_event_seconds, 64000);  // 8,000 up and back down, a second a step
  EXPECT_DOUBLE_EQ(f.lag_back_under_s, 16);      // 0 at t=76, the surge began at 60
  std::string md = CompareMarkdown({GrowingLag(), StaticPeak(16, 5000), dyn});
  EXPECT_EQ(LineWith(md, "grows through the surge"), "") << "an announced surge's check";
  EXPECT_EQ(LineWith(md, "no worse than twice"), "") << "an announced surge's check";
  const std::string peak = LineWith(md, "at most half static-baseline's");
  EXPECT_NE(peak.find("ratio 0.07 (8,000 / 119,000 events)"), std::string::npos) << peak;
  EXPECT_NE(peak.find("PASS"), std::string::npos) << peak;
  const std::string back = LineWith(md, "back under 1,000 events within 35 s");
  EXPECT_NE(back.find("16.0 s after the surge began"), std::string::npos) << back;
  EXPECT_NE(back.find("PASS"), std::string::npos) << back;
  const std::string area = LineWith(md, "event-seconds of lag are at most 15%");
  EXPECT_NE(area.find("(64,000 / 7,140,000 event-seconds)"), std::string::npos) << area;
  EXPECT_NE(area.find("PASS"), std::string::npos) << area;
  EXPECT_NE(LineWith(md, "at most half the partition-seconds"), "") << "kept for both";
  // A lag that never comes back under 1,000 fails, and so does one as high as the baseline's.
  for (auto& s : dyn.samples) s.lag = s.t >= 60 ? 119000 : 0;
  md = CompareMarkdown({GrowingLag(), StaticPeak(16, 5000), dyn});
  EXPECT_NE(LineWith(md, "back under 1,000 events within 35 s").find("never back under"),
            std::string::npos);
  EXPECT_NE(LineWith(md, "back under 1,000 events within 35 s").find("FAIL"), std::string::npos);
  EXPECT_NE(LineWith(md, "at most half static-baseline's").find("FAIL"), std::string::npos);
  EXPECT_NE(LineWith(md, "event-seconds of lag are at most 15%").find("FAIL"), std::string::npos);
}

TEST(RunReportCompare, TheBaselineLeftBehindPassesOnlyWhenItsLagGrew) {
  RunSummary base = GrowingLag();
  for (auto& s : base.samples) s.lag *= 2;  // 120,000 at the surge's end: 15x dynamic's peak
  std::string md = CompareMarkdown({base, StaticPeak(16, 5000), FlashSale()});
  std::string grows = LineWith(md, "grows through the surge");
  EXPECT_NE(grows.find("ratio 15.00"), std::string::npos) << grows;
  EXPECT_NE(grows.find("PASS"), std::string::npos) << grows;
  // A lag as high at the start as at the end did not grow through the surge.
  for (auto& s : base.samples) s.lag = 200000;
  md = CompareMarkdown({base, StaticPeak(16, 5000), FlashSale()});
  grows = LineWith(md, "grows through the surge");
  EXPECT_NE(grows.find("FAIL"), std::string::npos) << grows;
}

TEST(RunReportCompare, DynamicLosesTheTradeOff) {
  // static-peak with 8 partitions (1,440 partition-seconds) and a peak lag of 2,000.
  const std::string md = CompareMarkdown({FlashSale(), StaticPeak(8, 2000)});
  const std::string ps = LineWith(md, "at most half the partition-seconds");
  EXPECT_NE(ps.find("ratio 0.91"), std::string::npos) << ps;
  EXPECT_NE(ps.find("FAIL"), std::string::npos) << ps;
  const std::string lag = LineWith(md, "no worse than twice");
  EXPECT_NE(lag.find("ratio 4.00"), std::string::npos) << lag;
  EXPECT_NE(lag.find("FAIL"), std::string::npos) << lag;
}

TEST(RunReportCompare, ChecksNeedBothRuns) {
  const std::string md = CompareMarkdown({FlashSale(), GrowingLag()});
  EXPECT_EQ(LineWith(md, "at most half"), "");
  EXPECT_NE(md.find("need runs named"), std::string::npos);
}

TEST(RunReportWrite, WritesEveryFile) {
  shoal::testing::TempDir tmp("run-report");
  const std::string dir = tmp.path() + "/nested/report";
  const RunSummary run = FlashSale();
  ASSERT_TRUE(WriteReport(dir, run, {}).ok());
  for (const char* name : {"summary.md", "chart.svg", "timeline.csv", "report.json"}) {
    EXPECT_GT(std::filesystem::file_size(dir + "/" + name), 0u) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/compare.md"));

  const std::string csv = ReadAll(dir + "/timeline.csv");
  EXPECT_EQ(Count(csv, "\n"), run.samples.size() + 1);
  EXPECT_EQ(csv.rfind("t_s,", 0), 0u);
  EXPECT_NE(csv.find("\n68,10000,10000,16,8,8,8000,4\n"), std::string::npos);

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(dir + "/report.json").get(doc), simdjson::SUCCESS);
  EXPECT_EQ(double(doc["figures"]["peak_lag"]), 8000);
  EXPECT_EQ(double(doc["figures"]["partition_seconds"]), 1312);
  EXPECT_EQ(bool(doc["figures"]["scaled_down"]), true);
  EXPECT_EQ(uint64_t(doc["verify"]["acked"]), 1234567u);
  EXPECT_EQ(simdjson::dom::array(doc["decisions"]).size(), 2u);
  EXPECT_EQ(std::string_view(doc["checks"].at(0)["result"]), "PASS");
  EXPECT_EQ(bool(doc["verified"]), true);
  EXPECT_EQ(bool(doc["chaos"]), false);
}

TEST(RunReportWrite, AChaosRunWritesItsKillsAndFailovers) {
  shoal::testing::TempDir tmp("run-report-chaos");
  const RunSummary run = Chaos();
  ASSERT_TRUE(WriteReport(tmp.path(), run, {}).ok());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(tmp.path() + "/report.json").get(doc), simdjson::SUCCESS);
  EXPECT_EQ(bool(doc["chaos"]), true);
  EXPECT_EQ(uint64_t(doc["kills_planned"]), 1u);
  EXPECT_EQ(std::string_view(doc["kills"].at(0)["pod"]), "orders-3");
  EXPECT_EQ(uint64_t(doc["kills"].at(0)["pid"]), 4242u);
  EXPECT_EQ(std::string_view(doc["failovers"].at(0)["pods"].at(0)), "orders-3");
  EXPECT_EQ(uint64_t(doc["failovers"].at(1)["partitions"]), 2u);
  EXPECT_EQ(uint64_t(doc["figures"]["kills_failed_over"]), 1u);
  EXPECT_EQ(double(doc["figures"]["failover_s"]), 2.4);
  EXPECT_EQ(bool(doc["figures"]["chaos_failed_over"]), true);
  EXPECT_EQ(std::string_view(doc["checks"].at(2)["result"]), "PASS");
}

TEST(RunReportWrite, WritesTheComparison) {
  shoal::testing::TempDir tmp("run-report");
  const RunSummary run = FlashSale();
  const std::vector<RunSummary> compare = {StaticPeak(16, 5000), GrowingLag(), run};
  ASSERT_TRUE(WriteReport(tmp.path(), run, compare).ok());
  for (const char* name :
       {"compare.md", "chart-dynamic.svg", "chart-static-peak.svg", "chart-static-baseline.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/" + name)) << name;
  }
  EXPECT_NE(ReadAll(tmp.path() + "/summary.md").find("](compare.md)"), std::string::npos);

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(tmp.path() + "/report.json").get(doc), simdjson::SUCCESS);
  EXPECT_EQ(simdjson::dom::array(doc["compare"]["runs"]).size(), 3u);
  // The baseline's lag (60,000 at the surge's end) is 7.5 times dynamic's peak: short of 10x.
  EXPECT_EQ(std::string_view(doc["compare"]["checks"].at(0)["result"]), "FAIL");
  EXPECT_EQ(std::string_view(doc["compare"]["checks"].at(1)["result"]), "PASS");
  EXPECT_EQ(simdjson::dom::array(doc["compare"]["checks"]).size(), 4u);
}

TEST(RunReportWrite, FailsClearlyUnderARegularFile) {
  shoal::testing::TempDir tmp("run-report");
  const std::string file = tmp.path() + "/not-a-dir";
  std::ofstream(file) << "x";
  const std::string dir = file + "/report";
  const Status s = WriteReport(dir, FlashSale(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.ToString();

  const Status same = WriteReport(file, FlashSale(), {});
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.message().find(file), std::string::npos) << same.ToString();
}

}  // namespace
}  // namespace shoal::harness
