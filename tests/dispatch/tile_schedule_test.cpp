// The 256-token tile kernel's schedule (src/cuda/linear/tile_schedule.h): every tile is
// covered once, whole or by all of its splits, each split non-empty and the splits of a
// tile covering its K exactly; the tail is split only where it shortens the last wave, and
// never beyond the workspace's partial-tile slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/linear/tile_schedule.h"

namespace kbit::cuda::detail {
namespace {

void check_cover(int64_t items, int64_t ctas, int supertiles, int64_t slots) {
  const WsSchedule s = ws_schedule(items, ctas, supertiles, slots);
  const std::string what = "items " + std::to_string(items) + " ctas " + std::to_string(ctas) + " supertiles " +
                           std::to_string(supertiles) + " slots " + std::to_string(slots);
  ASSERT_EQ(s.full_items + s.tail_tiles, items) << what;
  ASSERT_LE(int64_t(s.tail_tiles) * s.tail_splits, std::max<int64_t>(slots, 0)) << what;
  ASSERT_GE(s.tail_splits, 1) << what;
  ASSERT_LE(s.tail_splits, kWsMaxTailSplits) << what;
  if (s.tail_splits == 1) {
    EXPECT_EQ(s.tail_tiles, 0) << what;
    return;
  }
  // Whole tiles fill whole waves; the tail is what is left, and splitting it is cheaper
  // than running it whole.
  EXPECT_EQ(s.full_items % ctas, 0) << what;
  EXPECT_LT(s.tail_tiles, ctas) << what;
  const int64_t waves = (int64_t(s.tail_tiles) * s.tail_splits + ctas - 1) / ctas;
  EXPECT_LT(waves * (s.per_split + kWsSplitOverheadSupertiles), supertiles) << what;
  std::vector<int> covered(size_t(supertiles), 0);
  for (int split = 0; split < s.tail_splits; ++split) {
    const int begin = split * s.per_split, end = std::min(supertiles, begin + s.per_split);
    ASSERT_LT(begin, end) << what << ": split " << split << " is empty";
    for (int st = begin; st < end; ++st) ++covered[size_t(st)];
  }
  for (int st = 0; st < supertiles; ++st) EXPECT_EQ(covered[size_t(st)], 1) << what << " supertile " << st;
}

TEST(TileSchedule, CoversEveryTileAndSupertileOnce) {
  for (int64_t items : {1, 4, 9, 31, 32, 48, 60, 80, 131, 132, 133, 192, 264, 384, 1536})
    for (int64_t ctas : {1, 7, 114, 132})
      for (int supertiles : {1, 2, 3, 4, 5, 12, 40, 96})
        for (int64_t slots : {0, 3, 132, 264}) check_cover(items, ctas, supertiles, slots);
}

TEST(TileSchedule, SplitsThePartEmptyLastWaveOnly) {
  // glm47 q at M = 512 on 132 SMs: 192 tiles, the last 60 in two halves (120 units).
  WsSchedule s = ws_schedule(192, 132, 40, 264);
  EXPECT_EQ(s.full_items, 132);
  EXPECT_EQ(s.tail_tiles, 60);
  EXPECT_EQ(s.tail_splits, 2);
  EXPECT_EQ(s.per_split, 20);
  // glm47 kv at M = 512: 32 tiles, all in quarters.
  s = ws_schedule(32, 132, 40, 264);
  EXPECT_EQ(s.full_items, 0);
  EXPECT_EQ(s.tail_splits, 4);
  // glm47 o at M = 512: 80 tiles of 96 supertiles, thirds (two waves of units).
  s = ws_schedule(80, 132, 96, 264);
  EXPECT_EQ(s.tail_splits, 3);
  EXPECT_EQ(s.per_split, 32);
  // Short K: 80 tiles of 12 supertiles (glm47 moe_dn), 32 tiles of 4: whole.
  EXPECT_EQ(ws_schedule(80, 132, 12, 264).tail_splits, 1);
  EXPECT_EQ(ws_schedule(32, 132, 4, 264).tail_splits, 1);
  // M = 4096, glm47 q: 1536 tiles, 84 left: whole (units would need two waves);
  // shared_gu: 3072 tiles, 36 left: thirds.
  EXPECT_EQ(ws_schedule(1536, 132, 40, 264).tail_splits, 1);
  EXPECT_EQ(ws_schedule(3072, 132, 40, 264).tail_splits, 3);
  // A last wave nearly full (shared_gu, 384 tiles: 120 left) or empty (264): no split.
  EXPECT_EQ(ws_schedule(384, 132, 40, 264).tail_splits, 1);
  EXPECT_EQ(ws_schedule(264, 132, 40, 264).tail_splits, 1);
  // No workspace, or K of one supertile: no split.
  EXPECT_EQ(ws_schedule(32, 132, 40, 0).tail_splits, 1);
  EXPECT_EQ(ws_schedule(32, 132, 1, 264).tail_splits, 1);
}

// Stream-K (wgmma_stream items): the CTAs' ranges cover every (item, supertile) once, in
// item-major order, with lengths differing by at most one; a CTA's segments of an item
// that is cut have distinct slots below 2 x ctas, at most two per CTA, and the item's
// segment count follows from its first and last CTA, as the kernel computes them.
void check_stream_k(int64_t items, int64_t max_ctas, int supertiles) {
  const StreamKSchedule s = stream_k_schedule(items, max_ctas, supertiles);
  const std::string what = "items " + std::to_string(items) + " ctas " + std::to_string(max_ctas) + " supertiles " +
                           std::to_string(supertiles);
  ASSERT_TRUE(s.on()) << what;
  ASSERT_EQ(s.work, items * supertiles) << what;
  ASSERT_EQ(s.ctas, std::min(max_ctas, s.work)) << what;
  ASSERT_EQ(s.begin(0), 0) << what;
  ASSERT_EQ(s.begin(s.ctas), s.work) << what;
  std::vector<int> segments_of(size_t(items), 0);
  std::vector<int> slot_users(size_t(2 * s.ctas), 0);
  for (int64_t b = 0; b < s.ctas; ++b) {
    const int64_t lo = s.begin(b), hi = s.begin(b + 1);
    ASSERT_TRUE(hi - lo == s.per_cta || hi - lo == s.per_cta + 1) << what << " cta " << b;
    ASSERT_GE(hi - lo, 1) << what;
    int partial = 0;
    for (int64_t w = lo; w < hi;) {
      const int64_t item = w / supertiles, st_begin = w % supertiles;
      const int64_t st_end = std::min<int64_t>(supertiles, st_begin + (hi - w));
      EXPECT_EQ(s.cta_of(w), b) << what;
      EXPECT_EQ(s.cta_of(w + (st_end - st_begin) - 1), b) << what;
      ++segments_of[size_t(item)];
      if (st_end - st_begin < supertiles) {
        ++partial;
        const int64_t slot = s.slot(b, item);
        // The 256-token kernel's 32-bit form (reduce_ws_stream_k_pieces): its own slot from
        // whether the segment starts the range, piece 0's from whether the item starts it.
        const StreamKRanges32 r(s);
        EXPECT_EQ(r.begin(int(b)), lo) << what;
        EXPECT_EQ(r.first_cta(int(item)), s.first_cta(item)) << what;
        EXPECT_EQ(r.last_cta(int(item)), s.last_cta(item)) << what;
        EXPECT_EQ(2 * b + (w == lo ? 0 : 1), slot) << what;
        const int first = r.first_cta(int(item));
        if (b == first) EXPECT_EQ(2 * first + (r.begin(first) == item * supertiles ? 0 : 1), slot) << what;
        else EXPECT_EQ(2 * b, slot) << what;
        ASSERT_GE(slot, 2 * b) << what;
        ASSERT_LE(slot, 2 * b + 1) << what;
        ++slot_users[size_t(slot)];
        EXPECT_GE(b, s.first_cta(item)) << what;
        EXPECT_LE(b, s.last_cta(item)) << what;
      }
      w += st_end - st_begin;
    }
    EXPECT_LE(partial, 2) << what << " cta " << b;
  }
  for (int64_t item = 0; item < items; ++item)
    EXPECT_EQ(segments_of[size_t(item)], s.last_cta(item) - s.first_cta(item) + 1) << what << " item " << item;
  for (size_t i = 0; i < slot_users.size(); ++i) EXPECT_LE(slot_users[i], 1) << what << " slot " << i;
}

TEST(TileSchedule, StreamKCoversEveryItemAndSupertileOnce) {
  for (int64_t items : {1, 2, 5, 31, 48, 96, 131, 132, 133, 192, 500})
    for (int64_t ctas : {1, 7, 100, 132, 264})
      for (int supertiles : {1, 2, 3, 4, 12, 40, 96}) check_stream_k(items, ctas, supertiles);
  // glm47 q at M = 64: 96 tiles of 40 supertiles on 132 CTAs, 29 or 30 each.
  const StreamKSchedule q = stream_k_schedule(96, 132, 40);
  EXPECT_EQ(q.per_cta, 29);
  EXPECT_EQ(q.extra, 12);
  // Less work than CTAs: one supertile per CTA.
  EXPECT_EQ(stream_k_schedule(2, 132, 3).ctas, 6);
  EXPECT_FALSE(stream_k_schedule(0, 132, 3).on());
}

}  // namespace
}  // namespace kbit::cuda::detail
