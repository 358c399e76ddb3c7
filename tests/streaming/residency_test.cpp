// The residency planner and source choice of weight streaming, with injected memory facts.
#include <gtest/gtest.h>

#include "kbit/error.h"
#include "kbit/streaming.h"

namespace kbit {
namespace {

constexpr int64_t GiB = int64_t(1) << 30;

MemoryFacts facts(int64_t gpu_free, int64_t host, bool gds = false) { return {gpu_free, host, gds, 55.0}; }

TEST(Residency, EverythingResidentWhenItFits) {
  ResidencyRequest r;
  r.layer_bytes = std::vector<int64_t>(10, 2 * GiB);
  r.reserve_bytes = 10 * GiB;
  const auto p = plan_residency(r, facts(40 * GiB, 100 * GiB));
  EXPECT_EQ(p.resident_layers, 10);
  EXPECT_EQ(p.slots, 0);
  EXPECT_EQ(p.streamed_bytes_per_pass, 0);
  EXPECT_EQ(p.gpu_bytes, 20 * GiB);
  EXPECT_NE(p.describe().find("nothing streamed"), std::string::npos);
}

TEST(Residency, LargestResidentPrefixPlusARingOfTheLargestStreamedLayer) {
  ResidencyRequest r;
  r.layer_bytes = {3 * GiB, 1 * GiB, 1 * GiB, 4 * GiB, 1 * GiB, 2 * GiB};  // uneven sizes
  r.slots = 2;
  // 12 GiB free, 1 GiB reserve: budget 11. Resident 3 (5 GiB) + ring 2 x 4 = 13 > 11; resident 2 (4 GiB) + 8 = 12 > 11;
  // resident 1 (3 GiB) + 8 = 11 fits.
  const auto p = plan_residency({r.layer_bytes, 1 * GiB, 2}, facts(12 * GiB, 64 * GiB));
  EXPECT_EQ(p.resident_layers, 1);
  EXPECT_EQ(p.slot_bytes, 4 * GiB);
  EXPECT_EQ(p.gpu_bytes, 11 * GiB);
  EXPECT_EQ(p.streamed_bytes_per_pass, 9 * GiB);
  EXPECT_NEAR(p.transfer_ms_per_pass, 9.0 * double(GiB) / 55e9 * 1e3, 1e-6);
  // once the big layer is resident the ring shrinks: with 3 more layers of 2 GiB and a 13 GiB budget,
  // 4 resident (9 GiB) + 2 x 2 = 13 fits, 5 resident needs 14
  std::vector<int64_t> more = r.layer_bytes;
  more.insert(more.end(), {2 * GiB, 2 * GiB});
  const auto q = plan_residency({more, 1 * GiB, 2}, facts(14 * GiB, 64 * GiB));
  EXPECT_EQ(q.resident_layers, 4);
  EXPECT_EQ(q.slot_bytes, 2 * GiB);
}

TEST(Residency, NoRoomForTheRingIsAClearError) {
  ResidencyRequest r;
  r.layer_bytes = {8 * GiB, 8 * GiB};
  r.slots = 3;
  try {
    plan_residency(r, facts(15 * GiB, 64 * GiB));  // a 3 x 8 GiB ring or both layers (16) do not fit
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not enough GPU memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_residency({{}, 0, 2}, facts(GiB, GiB)), Error);
  EXPECT_THROW(plan_residency({{GiB}, 0, 1}, facts(8 * GiB, GiB)), Error);
  EXPECT_THROW(plan_residency({{GiB, 0}, 0, 2}, facts(8 * GiB, GiB)), Error);
  EXPECT_THROW(plan_residency({{GiB}, 9 * GiB, 2}, facts(8 * GiB, GiB)), Error);
}

TEST(Residency, SourceFromRamAndGds) {
  ResidencyRequest r;
  r.layer_bytes = std::vector<int64_t>(100, 2 * GiB);  // 200 GiB model
  r.reserve_bytes = 4 * GiB;
  const auto pinned = plan_residency(r, facts(140 * GiB, 512 * GiB));
  EXPECT_EQ(pinned.source, StreamSource::pinned_host);
  EXPECT_GT(pinned.resident_layers, 0);
  const auto mmap = plan_residency(r, facts(140 * GiB, 32 * GiB));
  EXPECT_EQ(mmap.source, StreamSource::mapped_file);
  EXPECT_NE(mmap.reason.find("not available"), std::string::npos);
  const auto gds = plan_residency(r, facts(140 * GiB, 32 * GiB, true));
  EXPECT_EQ(gds.source, StreamSource::gds);
  r.source = StreamSource::pinned_host;
  EXPECT_THROW(plan_residency(r, facts(140 * GiB, 32 * GiB)), Error);
  r.source = StreamSource::gds;
  EXPECT_THROW(plan_residency(r, facts(140 * GiB, 512 * GiB, false)), Error);
  r.source = StreamSource::mapped_file;
  EXPECT_EQ(plan_residency(r, facts(140 * GiB, 512 * GiB)).source, StreamSource::mapped_file);
  EXPECT_EQ(parse_stream_source("mmap"), StreamSource::mapped_file);
  EXPECT_THROW(parse_stream_source("nvme"), Error);
}

}  // namespace
}  // namespace kbit
