// kbit::linear's planning (host only): paths by M, no empty split, bounded partials,
// forced options, the tuned-table format and lookup.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <utility>

#include "bench/linear_tune.h"
#include "bench/skinny_bench.h"
#include "cuda/skinny/skinny_args.h"
#include "dispatch/cublas_gemm.h"
#include "dispatch/linear_configs.h"
#include "dispatch/linear_internal.h"
#include "kbit/error.h"
#include "kbit/linear.h"
#include "kbit/skinny.h"
#include "support/test_support.h"

namespace kbit::generated {
extern const char* const kLinearConfigsJson;
}

namespace kbit {
namespace {

TEST(LinearPlan, SplitsAreNeverEmptyAndPartialsStayBounded) {
  for (int64_t k : {32, 96, 128, 1536, 5120, 5152, 12288})
    for (int64_t n : {16, 100, 2048, 12288})
      for (int64_t m : {1, 4, 16, 33, 64, 200})
        for (int forced : {0, 1, 3, 7, 40, 1000}) {
          LinearOptions o;
          o.path = LinearPath::fused_mma;
          o.splits = forced;
          const LinearPlan p = plan_linear(m, n, k, 4, o);
          const int64_t st = (k + 127) / 128;
          const int64_t per = (st + p.splits - 1) / p.splits;
          ASSERT_GE(p.splits, 1);
          ASSERT_LE(p.splits, st);
          ASSERT_LT((p.splits - 1) * per, st) << "empty split: K=" << k << " splits=" << p.splits;
          const int64_t tiles = (m + 8 * p.n_tiles - 1) / (8 * p.n_tiles);
          if (p.splits > 1) ASSERT_LE(p.splits * tiles * 8 * p.n_tiles, 256);
        }
}

// The fused kernel's (stripe, token tile) items, which the tune and the split heuristic count.
TEST(LinearPlan, FusedOutputItemsAreStripesTimesTokenTiles) {
  EXPECT_EQ(detail::fused_output_items(16, 5120, 2), 320);  // glm47 moe_dn at M = 16: 320 stripes, one tile
  EXPECT_EQ(detail::fused_output_items(12, 5120, 2), 320);  // a partial token tile counts
  EXPECT_EQ(detail::fused_output_items(17, 5120, 2), 640);
  EXPECT_EQ(detail::fused_output_items(1, 100, 1), 7);       // N = 100: the last stripe is partial
  EXPECT_EQ(detail::fused_output_items(64, 16, 8), 1);
}

TEST(LinearPlan, PathsByM) {
  // The GEMV for large projections at M <= 4 (glm47 q: 12288 x 5120), the fused kernel for small ones.
  for (int bits = 2; bits <= 5; ++bits)
    for (int64_t m = 1; m <= 4; ++m) EXPECT_EQ(plan_linear(m, 12288, 5120, bits).path, LinearPath::gemv) << m;
  EXPECT_EQ(plan_linear(1, 2048, 5120, 4).path, LinearPath::fused_mma);
  EXPECT_EQ(plan_linear(2, 24576, 5120, 5).path, LinearPath::gemv);       // glm47 shared_gu
  EXPECT_EQ(plan_linear(4, 24576, 5120, 4).path, LinearPath::gemv);       // tuned so at M = 4 on the H200
  EXPECT_EQ(plan_linear(4, 5120, 12288, 4).path, LinearPath::fused_mma);  // 4 rows of K = 12288
  EXPECT_EQ(plan_linear(4, 5120, 12288, 4).items, LinearItems::stripes);
  EXPECT_EQ(plan_linear(4, 5120, 12288, 4).warps, 8);                    // long K: 8 warps
  EXPECT_EQ(plan_linear(5, 12288, 5120, 4).path, LinearPath::fused_mma);
  // x must fit in one CTA's shared memory: 4 x 40000 fp16 values do not
  EXPECT_EQ(plan_linear(4, 64, 40000, 4).path, LinearPath::fused_mma);
  LinearOptions g;
  g.path = LinearPath::gemv;
  EXPECT_EQ(plan_linear(1, 100, 96, 3, g).describe(), "gemv (forced)");
  EXPECT_THROW(plan_linear(5, 64, 64, 4, g), Error);
  EXPECT_THROW(plan_linear(4, 64, 40000, 4, g), Error);
  EXPECT_EQ(parse_linear_path("gemv"), LinearPath::gemv);
  LinearOptions f;
  f.path = LinearPath::fused_mma;
  EXPECT_EQ(plan_linear(1, 4096, 4096, 4, f).path, LinearPath::fused_mma);
  EXPECT_EQ(plan_linear(1, 4096, 4096, 4, f).n_tiles, 1);
  EXPECT_EQ(plan_linear(16, 4096, 4096, 4).n_tiles, 2);
  EXPECT_EQ(plan_linear(32, 4096, 4096, 4).n_tiles, 2);  // small W at M = 17..32: stripes of two token tiles
  EXPECT_EQ(plan_linear(32, 4096, 4096, 4).items, LinearItems::stripes);
  EXPECT_EQ(plan_linear(32, 12288, 5120, 4).n_tiles, 4);
  EXPECT_EQ(plan_linear(32, 4096, 4096, 4).path, LinearPath::fused_mma);
  EXPECT_EQ(plan_linear(64, 4096, 4096, 4).path, LinearPath::dequant_cublas);
  EXPECT_EQ(plan_linear(4096, 4096, 4096, 4).path, LinearPath::dequant_cublas);
  LinearOptions o;
  o.path = LinearPath::fused_mma;
  EXPECT_EQ(plan_linear(4096, 4096, 4096, 4, o).path, LinearPath::fused_mma);
  EXPECT_EQ(plan_linear(4096, 4096, 4096, 4, o).source, "forced");
  EXPECT_THROW(plan_linear(1, 64, 64, 6), Error);
  EXPECT_THROW(plan_linear(0, 64, 64, 4), Error);
  o.warps = 5;
  EXPECT_THROW(plan_linear(1, 64, 64, 4, o), Error);
  EXPECT_EQ(parse_linear_path("dequant_cublas"), LinearPath::dequant_cublas);
  EXPECT_EQ(plan_linear(1, 4096, 4096, 4, f).items, LinearItems::cta);
  LinearOptions w;
  w.items = LinearItems::warp;
  const LinearPlan pw = plan_linear(1, 2048, 5120, 4, w);
  EXPECT_EQ(pw.items, LinearItems::warp);
  EXPECT_LE(pw.splits, 8);
  EXPECT_NE(pw.describe().find("items=warp"), std::string::npos);
  EXPECT_THROW(parse_linear_path("fast"), Error);
  LinearOptions st;
  st.items = LinearItems::stripes;
  const LinearPlan ps = plan_linear(16, 12288, 5120, 4, st);
  EXPECT_EQ(ps.items, LinearItems::stripes);
  EXPECT_NE(ps.describe().find("items=stripes"), std::string::npos);
  for (LinearItems i : {LinearItems::automatic, LinearItems::cta, LinearItems::warp, LinearItems::stripes,
                        LinearItems::wgmma, LinearItems::cta_shuffle, LinearItems::wgmma_tile,
                        LinearItems::wgmma_stream})
    EXPECT_EQ(parse_linear_items(linear_items_name(i)), i);
  // wgmma_tile items: 64 tokens per tile up to M = 64, 128 up to 128, 256 above; n_tiles 8, 16 or 32
  LinearOptions tl;
  tl.path = LinearPath::fused_mma, tl.items = LinearItems::wgmma_tile;
  const LinearPlan ptl = plan_linear(128, 12288, 5120, 4, tl);
  EXPECT_EQ(ptl.items, LinearItems::wgmma_tile);
  EXPECT_EQ(ptl.n_tiles, 16);
  EXPECT_EQ(plan_linear(512, 12288, 5120, 4, tl).n_tiles, 32);
  EXPECT_EQ(ptl.warps, 8);
  EXPECT_LE(ptl.splits * 128, 256);  // the partials workspace bounds splits
  EXPECT_EQ(plan_linear(64, 12288, 5120, 4, tl).n_tiles, 8);
  EXPECT_EQ(plan_linear(3, 100, 96, 2, tl).n_tiles, 8);  // padded tokens
  EXPECT_NE(ptl.describe().find("items=wgmma_tile"), std::string::npos);
  tl.n_tiles = 32;  // the warp-specialised kernel: 8 MMA warps, no splits
  const LinearPlan pws = plan_linear(4096, 12288, 5120, 4, tl);
  EXPECT_EQ(pws.n_tiles, 32);
  EXPECT_EQ(pws.warps, 8);
  EXPECT_EQ(pws.splits, 1);
  tl.warps = 4;  // asked for explicitly: an error, not silently 8
  EXPECT_THROW(plan_linear(4096, 12288, 5120, 4, tl), Error);
  tl.warps = 0;
  tl.n_tiles = 4;
  EXPECT_THROW(plan_linear(64, 12288, 5120, 4, tl), Error);
  // wgmma_stream items (stream-K tiles): 64 or 128 tokens per tile unless asked for 256, two
  // warpgroups on the warp-specialised kernel (16 warps: 8 decode) unless asked for 8 warps that
  // decode and multiply alike, no splits. 16 warps are that kernel's only.
  LinearOptions sk;
  sk.path = LinearPath::fused_mma, sk.items = LinearItems::wgmma_stream;
  const LinearPlan psk = plan_linear(64, 12288, 5120, 4, sk);
  EXPECT_EQ(psk.items, LinearItems::wgmma_stream);
  EXPECT_EQ(psk.n_tiles, 8);
  EXPECT_EQ(psk.warps, 16);
  EXPECT_EQ(psk.splits, 1);
  EXPECT_EQ(plan_linear(100, 100, 96, 3, sk).warps, 16);  // untuned
  for (int warps : {4, 8, 16}) {
    LinearOptions w = sk;
    w.warps = warps, w.n_tiles = 16;
    EXPECT_EQ(plan_linear(100, 12288, 5120, 4, w).warps, warps);
  }
  LinearOptions tile16 = tl;
  tile16.n_tiles = 8, tile16.warps = 16;  // 16 warps with whole tiles: no such kernel
  EXPECT_THROW(plan_linear(64, 12288, 5120, 4, tile16), Error);
  LinearOptions sk256w16 = sk;
  sk256w16.n_tiles = 32, sk256w16.warps = 16;  // the 256-token kernel has 8 MMA warps
  EXPECT_THROW(plan_linear(512, 12288, 5120, 4, sk256w16), Error);
  EXPECT_EQ(plan_linear(100, 12288, 5120, 4, sk).n_tiles, 16);
  EXPECT_NE(psk.describe().find("items=wgmma_stream"), std::string::npos);
  sk.splits = 3;  // ignored: stream-K cuts K itself
  EXPECT_EQ(plan_linear(64, 12288, 5120, 4, sk).splits, 1);
  EXPECT_EQ(plan_linear(512, 12288, 5120, 4, sk).n_tiles, 16);
  sk.splits = 0, sk.n_tiles = 32;  // the warp-specialised kernel with stream-K
  const LinearPlan psk256 = plan_linear(512, 12288, 5120, 4, sk);
  EXPECT_EQ(psk256.items, LinearItems::wgmma_stream);
  EXPECT_EQ(psk256.n_tiles, 32);
  EXPECT_EQ(psk256.warps, 8);
  EXPECT_EQ(psk256.splits, 1);
  sk.warps = 4;  // asked for explicitly: an error, not silently 8
  EXPECT_THROW(plan_linear(512, 12288, 5120, 4, sk), Error);
  sk.warps = 0, sk.n_tiles = 4;
  EXPECT_THROW(plan_linear(512, 12288, 5120, 4, sk), Error);
  tl.n_tiles = 16, tl.splits = 8;
  EXPECT_LE(plan_linear(64, 12288, 5120, 4, tl).splits * 128, 256);  // the partials workspace bounds splits
  // cta_shuffle items: n_tiles 1 or 2 only
  LinearOptions sh;
  sh.items = LinearItems::cta_shuffle;
  const LinearPlan psh = plan_linear(16, 2048, 512, 4, sh);
  EXPECT_EQ(psh.items, LinearItems::cta_shuffle);
  EXPECT_LE(psh.n_tiles, 2);
  EXPECT_NE(psh.describe().find("items=cta_shuffle"), std::string::npos);
  EXPECT_LE(plan_linear(64, 2048, 512, 4, sh).n_tiles, 2);  // clamped when not asked for
  sh.n_tiles = 4;
  EXPECT_THROW(plan_linear(32, 2048, 512, 4, sh), Error);
  // untuned small W at k >= 3: cta_shuffle items at M = 9..16 (and at M = 5..8 for k = 5); at
  // M <= 8 otherwise where K has <= 16 supertiles and the stripes are no more than the SMs (132
  // without a GPU); cta items otherwise, and always at k = 2
  for (int64_t m : {1, 4, 8, 12, 16}) {
    SCOPED_TRACE(m);
    const LinearPlan small_k = plan_linear(m, 1536, 1024, 4);
    EXPECT_EQ(small_k.source, "heuristic");
    EXPECT_EQ(small_k.path, LinearPath::fused_mma);
    EXPECT_EQ(small_k.items, LinearItems::cta_shuffle);
    EXPECT_LE(small_k.n_tiles, 2);
    EXPECT_EQ(plan_linear(m, 1536, 1024, 2).items, LinearItems::cta);  // k = 2: no table to skip
    const LinearItems wide = m > 8 ? LinearItems::cta_shuffle : LinearItems::cta;
    EXPECT_EQ(plan_linear(m, 4160, 1024, 4).items, wide);  // 260 stripes
    EXPECT_EQ(plan_linear(m, 2048, 5120, 4).items, wide);  // 40 supertiles (glm47 kv)
    EXPECT_EQ(plan_linear(m, 2048, 5120, 5).items, m > 4 ? LinearItems::cta_shuffle : LinearItems::cta);
  }
  // wgmma items: one warpgroup (4 warps) over 32 tokens up to M = 32, 64 above
  LinearOptions wg;
  wg.items = LinearItems::wgmma;
  const LinearPlan pg = plan_linear(64, 12288, 5120, 4, wg);
  EXPECT_EQ(pg.items, LinearItems::wgmma);
  EXPECT_EQ(pg.warps, 4);
  EXPECT_EQ(pg.n_tiles, 8);
  EXPECT_EQ(plan_linear(20, 12288, 5120, 4, wg).n_tiles, 4);
  EXPECT_EQ(plan_linear(1, 12288, 5120, 4, wg).n_tiles, 4);  // padded tokens
  EXPECT_NE(pg.describe().find("items=wgmma"), std::string::npos);
  LinearOptions wg8 = wg;
  wg8.warps = 8;  // two warpgroups sharing x
  EXPECT_EQ(plan_linear(64, 12288, 5120, 4, wg8).warps, 8);
  LinearOptions wg2 = wg;
  wg2.n_tiles = 2;
  EXPECT_THROW(plan_linear(64, 12288, 5120, 4, wg2), Error);
  EXPECT_THROW(parse_linear_items("rows"), Error);
  // untuned large W: stripes items wherever the fused kernel runs (up to M = 64), 8 warps on long K
  EXPECT_EQ(plan_linear(16, 12288, 5120, 4).items, LinearItems::stripes);
  EXPECT_EQ(plan_linear(16, 12288, 5120, 4).warps, 4);
  EXPECT_EQ(plan_linear(8, 12288, 5120, 4, f).items, LinearItems::stripes);
  EXPECT_EQ(plan_linear(8, 12288, 5120, 4, f).n_tiles, 1);
  EXPECT_EQ(plan_linear(8, 5120, 12288, 4).warps, 8);
  EXPECT_EQ(plan_linear(64, 12288, 5120, 4).path, LinearPath::fused_mma);
  EXPECT_EQ(plan_linear(65, 12288, 5120, 4).path, LinearPath::dequant_cublas);
  // untuned small W (shapes not in the table): no split; 8 warps where K has 8 supertiles and the
  // stripes are at most twice the SMs; at M = 9..16 two token tiles unless N <= 1024
  EXPECT_EQ(plan_linear(16, 4000, 2000, 4).warps, 8);
  EXPECT_EQ(plan_linear(16, 4000, 2000, 4).splits, 1);
  EXPECT_EQ(plan_linear(16, 4000, 2000, 4).n_tiles, 2);
  EXPECT_EQ(plan_linear(12, 2048, 5120, 4).n_tiles, 2);  // glm47 kv: two tiles from M = 9
  EXPECT_EQ(plan_linear(16, 1024, 2000, 4).n_tiles, 1);
  EXPECT_EQ(plan_linear(32, 1000, 2000, 4).n_tiles, 2);
  EXPECT_EQ(plan_linear(16, 7168, 3584, 4).warps, 4);    // 448 stripes (Kimi)
  EXPECT_EQ(plan_linear(16, 7168, 3584, 4).items, LinearItems::cta_shuffle);
  EXPECT_EQ(plan_linear(16, 7168, 3584, 2).items, LinearItems::cta);
  EXPECT_EQ(plan_linear(8, 4000, 2000, 4, f).warps, 8);
  EXPECT_EQ(plan_linear(8, 4000, 2000, 4, f).splits, 1);
  EXPECT_EQ(plan_linear(8, 4000, 500, 4).warps, 4);  // 4 supertiles of K
  EXPECT_GT(plan_linear(8, 100, 40000, 4).splits, 1);  // 7 stripes over a long K still split
  LinearOptions fc = f;
  fc.items = LinearItems::cta;
  EXPECT_EQ(plan_linear(8, 12000, 5000, 4, fc).splits, 1);  // untuned large W, CTA items: no split
}

// Untuned small W at M = 17..32 over 8..16 supertiles: CTA items without a split from 128 stripes up to twice
// the SMs (at k = 2, 3 up to the SMs), stripes items beyond (H200 timing, sixty-fourth session: CTA items ran
// 1.4-2.1x the stripes plans' time on glm47 moe_dn, 320 stripes, and on 256 stripes at k = 2, 3). Shapes
// that no tuned table holds.
TEST(LinearPlan, UntunedSmallWCtaItemsStayWithinTwiceTheSms) {
  const int64_t sms = detail::linear_sm_count(), k = 2000;  // 16 supertiles
  const int64_t n_few = 16 * std::max<int64_t>(128, sms - 4), n_between = 16 * (sms + sms / 2 + 1),
                n_many = 16 * (2 * sms + 56);
  EXPECT_EQ(plan_linear(24, n_few, k, 2).items, LinearItems::cta);
  EXPECT_EQ(plan_linear(24, n_few, k, 2).splits, 1);
  EXPECT_EQ(plan_linear(24, n_between, k, 4).items, LinearItems::cta);
  EXPECT_EQ(plan_linear(24, n_between, k, 4).n_tiles, 4);
  for (int bits : {2, 3}) EXPECT_EQ(plan_linear(24, n_between, k, bits).items, LinearItems::stripes) << bits;
  for (int bits : {2, 3, 4, 5}) EXPECT_EQ(plan_linear(24, n_many, k, bits).items, LinearItems::stripes) << bits;
}

TEST(SkinnyPlan, ShapesAndErrors) {
  // The early tile refill: PDL, one wave of >= 2 CTAs per SM, no cluster (132 SMs, 4 per SM).
  using cuda::detail::skinny_early_refill;
  EXPECT_TRUE(skinny_early_refill(true, 1, 448, 4, 132));    // Kimi-K3: 448 row groups
  EXPECT_TRUE(skinny_early_refill(true, 1, 264, 4, 132));
  EXPECT_FALSE(skinny_early_refill(false, 1, 448, 4, 132));  // isolated calls
  EXPECT_FALSE(skinny_early_refill(true, 2, 448, 4, 132));   // clusters
  EXPECT_FALSE(skinny_early_refill(true, 1, 256, 4, 132));   // under 2 CTAs per SM (Qwen3)
  EXPECT_FALSE(skinny_early_refill(true, 1, 768, 4, 132));   // more than one wave
  EXPECT_EQ(plan_skinny(1, 7168, 3584).n_tiles, 1);
  EXPECT_EQ(plan_skinny(16, 7168, 3584).n_tiles, 2);
  EXPECT_EQ(plan_skinny(17, 7168, 3584).n_tiles, 4);
  EXPECT_EQ(plan_skinny(32, 7168, 3584).n_tiles, 4);
  // 448 row groups (of 16 rows) cover 132 SMs: no cluster split; 32 (N = 512) need one.
  EXPECT_EQ(plan_skinny(1, 7168, 3584).splits, 1);
  EXPECT_GT(plan_skinny(1, 512, 2048).splits, 1);
  EXPECT_EQ(plan_skinny(1, 512, 8).splits, 1);  // one 32-column step: no split can be non-empty
  SkinnyOptions o;
  o.loader = SkinnyLoader::tma, o.splits = 8;
  EXPECT_EQ(plan_skinny(1, 64, 64, o).splits, 2);  // K = 64 is two 32-column steps of the ring
  o.loader = SkinnyLoader::automatic;
  EXPECT_EQ(plan_skinny(1, 64, 64, o).splits, 1);  // one 128-column batch of the async loader
  EXPECT_STREQ(plan_skinny(1, 64, 64, o).source, "forced");
  // Each override outside its instantiated values is an error.
  for (auto bad : std::initializer_list<void (*)(SkinnyOptions&)>{
           [](SkinnyOptions& b) { b.splits = 3; }, [](SkinnyOptions& b) { b.warps = 6; },
           [](SkinnyOptions& b) { b.kslice = 300; }, [](SkinnyOptions& b) { b.stages = 9; },
           [](SkinnyOptions& b) { b.stripes = 3; }}) {
    o = {};
    bad(o);
    EXPECT_THROW(plan_skinny(1, 64, 4096, o), Error);
  }
  EXPECT_THROW(plan_skinny(33, 64, 64), Error);
  // Untuned (no GPU here, so no table): the async streaming kernel up to M = 16, the ring above.
  EXPECT_EQ(plan_skinny(1, 7168, 3584).describe(), "l=async,w=4,r=1,p=2,c=128,s=1");
  EXPECT_EQ(plan_skinny(17, 7168, 3584).describe(), "w=4,r=2,p=3,c=256,s=1");
  // Two token tiles: 64-column tiles where 128 would not hold the grid in one wave at three CTAs
  // per SM (Kimi-K3's 448) or would leave a warp fewer than 8 batches (glm47 kv: two splits of
  // 2560 columns); 128 where both hold (glm47 moe_gu, 192 CTAs, 10 batches per warp).
  const SkinnyPlan kimi16 = plan_skinny(16, 7168, 3584);
  EXPECT_EQ(kimi16.describe(), "l=async,w=4,r=1,p=2,c=64,s=1");
  EXPECT_LE(4 * cuda::detail::skinny_shared_bytes(cuda::detail::skinny_shape_of(kimi16), 16), size_t(228) << 10);
  EXPECT_EQ(cuda::detail::skinny_stream_resident_ctas(cuda::detail::skinny_shape_of(kimi16), 16), 4);
  SkinnyPlan kimi16_wide = kimi16;
  kimi16_wide.kslice = 128;  // 64 KB per CTA: three fit, so 448 CTAs take two waves on 132 SMs
  EXPECT_EQ(cuda::detail::skinny_stream_resident_ctas(cuda::detail::skinny_shape_of(kimi16_wide), 16), 3);
  EXPECT_EQ(plan_skinny(9, 2048, 5120).describe(), "l=async,w=4,r=1,p=2,c=64,s=2");
  EXPECT_EQ(plan_skinny(16, 3072, 5120).describe(), "l=async,w=4,r=1,p=2,c=128,s=1");
  // Large weights (glm47 q: 12288 x 5120) at M = 9-16: async with two stripes (384 CTAs of 32 rows).
  EXPECT_EQ(plan_skinny(16, 12288, 5120).describe(), "l=async,w=4,r=2,p=2,c=64,s=1");
  EXPECT_EQ(plan_skinny(8, 12288, 5120).describe(), "l=async,w=4,r=1,p=2,c=128,s=1");
  EXPECT_EQ(plan_skinny(1, 2048, 7168).stripes, 1);  // 64 groups of 32 rows would leave SMs idle
}

TEST(SkinnyPlan, StreamingKernelShapesAndErrors) {
  SkinnyOptions o;
  o.loader = SkinnyLoader::registers;
  const SkinnyPlan p = plan_skinny(1, 7168, 3584, o);
  EXPECT_EQ(p.describe(), "l=reg,w=4,r=1,p=2,c=64,s=1");  // 448 CTAs of 16 rows: no split
  o.loader = SkinnyLoader::staged;
  EXPECT_EQ(plan_skinny(16, 7168, 3584, o).describe(), "l=smem,w=4,r=1,p=2,c=64,s=1");
  // N = 512 is 32 row groups: split K while each warp keeps two 64-column batches.
  EXPECT_EQ(plan_skinny(1, 512, 2048, o).splits, 4);
  EXPECT_EQ(plan_skinny(1, 512, 64, o).splits, 1);
  o.splits = 8;
  EXPECT_EQ(plan_skinny(1, 64, 128, o).splits, 2);  // K = 128 is two batches
  for (auto bad : std::initializer_list<void (*)(SkinnyOptions&)>{
           [](SkinnyOptions& b) { b.stripes = 2; }, [](SkinnyOptions& b) { b.stages = 4; },
           [](SkinnyOptions& b) { b.kslice = 256; }, [](SkinnyOptions& b) { b.warps = 2; },
           [](SkinnyOptions& b) { b.kslice = 128, b.stages = 3; }}) {
    o = {};
    o.loader = SkinnyLoader::registers;
    bad(o);
    EXPECT_THROW(plan_skinny(1, 64, 4096, o), Error);
  }
  o = {};
  o.loader = SkinnyLoader::staged;
  EXPECT_THROW(plan_skinny(17, 64, 4096, o), Error);  // the streaming kernel stops at M = 16
  EXPECT_EQ(parse_skinny_loader("smem"), SkinnyLoader::staged);
  EXPECT_EQ(parse_skinny_loader("async"), SkinnyLoader::async);
  o = {};
  o.loader = SkinnyLoader::async, o.stages = 9;
  EXPECT_THROW(plan_skinny(1, 64, 4096, o), Error);
  o.stages = 8, o.kslice = 128;
  EXPECT_EQ(plan_skinny(16, 64, 4096, o).describe(), "l=async,w=4,r=1,p=8,c=128,s=4");  // 4 row groups: split
  EXPECT_THROW(plan_skinny(16, 64, 4096, [&] { auto b = o; b.stripes = 2; return b; }()), Error);  // 128 columns
  o.stripes = 2, o.kslice = 64;
  EXPECT_EQ(plan_skinny(16, 64, 4096, o).stripes, 2);  // two stripes: async only
  o.loader = SkinnyLoader::staged, o.stages = 2, o.kslice = 64;
  EXPECT_THROW(plan_skinny(16, 64, 4096, o), Error);
  EXPECT_THROW(parse_skinny_loader("dma"), Error);
}

TEST(SkinnyPlan, RingsFitInSharedMemory) {
  // Barriers (128 bytes), then 3 slots of (32 W rows + 1 A row) x 256 columns x 2 bytes.
  EXPECT_EQ(cuda::detail::skinny_shared_bytes({1, 4, 2, 3, 256, 1}, 1), size_t(128 + 3 * 33 * 512));
  // The reduction needs more than a small ring: 8 warps x 4 stripes x 4 tiles x 4 x 32 floats.
  EXPECT_EQ(cuda::detail::skinny_shared_bytes({4, 8, 4, 2, 128, 1}, 1), size_t(128 + 8 * 4 * 4 * 4 * 32 * 4));
  // Every planned shape, tuned or heuristic, fits at every M.
  for (int64_t m = 1; m <= kMaxSkinnyM; ++m)
    for (auto [n, k] : {std::pair<int64_t, int64_t>{7168, 3584}, {512, 2048}, {100, 3592}, {32768, 8192}}) {
      const SkinnyPlan p = plan_skinny(m, n, k);
      EXPECT_LE(cuda::detail::skinny_shared_bytes(cuda::detail::skinny_shape_of(p), int(m)),
                cuda::detail::kMaxSkinnySharedBytes)
          << "M=" << m << " N=" << n << " K=" << k << " " << p.describe();
    }
}

TEST(SkinnyConfig, EverySweepCandidateIsAValidPlan) {
  for (int64_t m : {1, 8, 16, 32}) {
    const auto all = bench::skinny_sweep_candidates(m);
    EXPECT_GT(all.size(), 100u) << "M=" << m;
    bool streaming = false;
    for (const auto& c : all) {
      SkinnyOptions o;
      o.loader = c.loader, o.warps = c.warps, o.stripes = c.stripes, o.stages = c.stages, o.kslice = c.kslice;
      o.splits = c.splits;
      EXPECT_NO_THROW(plan_skinny(m, 7168, 3584, o)) << "M=" << m << " " << bench::skinny_config_name(c);
      streaming |= c.loader != SkinnyLoader::tma;
      // 128-column batches through registers spill with two token tiles: not instantiated
      if (c.loader == SkinnyLoader::registers || c.loader == SkinnyLoader::staged)
        EXPECT_TRUE(c.kslice == 64 || m <= 8) << bench::skinny_config_name(c);
    }
    EXPECT_EQ(streaming, m <= 16) << "M=" << m;  // the streaming kernel stops at M = 16
  }
}

TEST(SkinnyConfig, NamesRoundTripAndTheBestValidRowWins) {
  const auto c = bench::parse_skinny_config("w=4,r=2,p=3,c=512,s=4");
  EXPECT_EQ(c.bits, 16);
  EXPECT_EQ(c.warps, 4);
  EXPECT_EQ(c.stripes, 2);
  EXPECT_EQ(c.stages, 3);
  EXPECT_EQ(c.kslice, 512);
  EXPECT_EQ(c.splits, 4);
  EXPECT_EQ(bench::skinny_config_name(c), "w=4,r=2,p=3,c=512,s=4");
  EXPECT_THROW(bench::parse_skinny_config("w=two,p=8"), Error);
  EXPECT_THROW(bench::parse_skinny_config("speed=9"), Error);
  EXPECT_THROW(bench::parse_skinny_config("u=2"), Error);  // the old kernel's key
  const auto streaming = bench::parse_skinny_config("l=smem,w=8,r=1,p=3,c=64,s=2");
  EXPECT_EQ(streaming.loader, SkinnyLoader::staged);
  EXPECT_EQ(bench::skinny_config_name(streaming), "l=smem,w=8,r=1,p=3,c=64,s=2");
  EXPECT_THROW(bench::parse_skinny_config("l=fast"), Error);
  std::vector<bench::SkinnyBenchRow> rows(4);
  for (int i = 0; i < 4; ++i) {
    rows[size_t(i)].backend = "kbit_skinny", rows[size_t(i)].m = 1, rows[size_t(i)].valid = true;
    rows[size_t(i)].median_us = 10.0 - i, rows[size_t(i)].plan.splits = 1 << i, rows[size_t(i)].plan.us = 10.0 - i;
  }
  rows[3].valid = false;       // fastest but wrong
  rows[2].spill_bytes = 8;     // second fastest but spills
  const auto best = bench::best_skinny_configs(rows);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].splits, 2);
  EXPECT_FALSE(best[0].pdl);
  // --pdl rows give their own entry per M, marked pdl, even when slower than the plain rows.
  bench::SkinnyBenchRow chained = rows[0];
  chained.backend = "kbit_skinny_pdl", chained.median_us = 11.0, chained.plan.splits = 4, chained.plan.us = 11.0;
  rows.push_back(chained);
  const auto both = bench::best_skinny_configs(rows);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_FALSE(both[0].pdl);
  EXPECT_EQ(both[0].splits, 2);
  EXPECT_TRUE(both[1].pdl);
  EXPECT_EQ(both[1].splits, 4);
}

TEST(LinearConfigs, RoundTripAndLookupByMRange) {
  std::vector<detail::LinearConfig> t;
  for (int64_t m : {1, 4, 16}) {
    detail::LinearConfig c;
    c.device = "GPU X", c.bits = 4, c.n = 4096, c.k = 2048, c.m = m, c.splits = int(m), c.us = 1.5;
    t.push_back(c);
  }
  detail::LinearConfig dense;
  dense.device = "GPU X", dense.bits = 16, dense.n = 7168, dense.k = 3584, dense.m = 8;
  dense.loader = SkinnyLoader::registers, dense.stages = 3, dense.kslice = 64;
  t.push_back(dense);
  const auto back = detail::parse_linear_configs(detail::linear_configs_to_json(t));
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 16, 7168, 3584, 8)->loader, SkinnyLoader::registers);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 4, 4096, 2048, 1)->splits, 1);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 4, 4096, 2048, 3)->splits, 4);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 4, 4096, 2048, 16)->splits, 16);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 4, 4096, 2048, 17), nullptr);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 4, 4096, 2048, 8), nullptr);  // not above 16 / 2
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 4, 4096, 2048, 9)->splits, 16);
  EXPECT_EQ(detail::find_linear_config(back, "GPU Y", 4, 4096, 2048, 1), nullptr);
  EXPECT_THROW(detail::parse_linear_configs("{\"entries\": [{\"bits\": 4}]}"), Error);
}

TEST(LinearConfigs, ParseRejectsEntriesThatCouldNeverApply) {
  auto entry = [](const std::string& fields) {
    return "{\"entries\": [{\"device\": \"GPU X\", \"path\": \"fused_mma\", " + fields + "}]}";
  };
  EXPECT_NO_THROW(detail::parse_linear_configs(entry("\"bits\": 4, \"n\": 64, \"k\": 64, \"m\": 1")));
  EXPECT_THROW(detail::parse_linear_configs(entry("\"bits\": 7, \"n\": 64, \"k\": 64, \"m\": 1")), Error);
  EXPECT_THROW(detail::parse_linear_configs(entry("\"bits\": 4, \"n\": 64, \"k\": 64, \"m\": 0")), Error);
  EXPECT_THROW(detail::parse_linear_configs(entry("\"bits\": 4, \"n\": -64, \"k\": 64, \"m\": 1")), Error);
  EXPECT_THROW(detail::parse_linear_configs(entry("\"bits\": 4, \"n\": 64, \"k\": 64, \"m\": 1, \"splits\": 0")),
               Error);
}

// The dequant_cublas path's GEMM algorithm (cuBLASLt's heuristic candidate): kept by the table
// (written only where it is not the first), forced by the options, range-checked in both.
TEST(LinearConfigs, GemmAlgoRoundTripsAndIsRangeChecked) {
  detail::LinearConfig c;
  c.device = "GPU X", c.bits = 3, c.n = 512, c.k = 2048, c.m = 4096, c.path = LinearPath::dequant_cublas, c.gemm_algo = 3;
  detail::LinearConfig first = c;
  first.m = 512, first.gemm_algo = 0;
  const std::string json = detail::linear_configs_to_json({c, first});
  EXPECT_NE(json.find("\"gemm_algo\":3"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"gemm_algo\":0"), std::string::npos) << json;
  const auto back = detail::parse_linear_configs(json);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].gemm_algo, 3);
  EXPECT_EQ(back[1].gemm_algo, 0);
  auto entry = [](const std::string& algo) {
    return "{\"entries\": [{\"device\": \"GPU X\", \"path\": \"dequant_cublas\", \"bits\": 4, \"n\": 64, \"k\": 64, "
           "\"m\": 64, \"gemm_algo\": " + algo + "}]}";
  };
  EXPECT_NO_THROW(detail::parse_linear_configs(entry("7")));
  EXPECT_THROW(detail::parse_linear_configs(entry("8")), Error);
  EXPECT_THROW(detail::parse_linear_configs(entry("-1")), Error);

  LinearOptions o;
  o.path = LinearPath::dequant_cublas;
  EXPECT_EQ(plan_linear(4096, 512, 2048, 3, o).gemm_algo, 0);
  o.gemm_algo = 5;
  const LinearPlan p = plan_linear(4096, 512, 2048, 3, o);
  EXPECT_EQ(p.gemm_algo, 5);
  EXPECT_EQ(p.describe(), "dequant_cublas gemm_algo=5 (forced)");
  o.gemm_algo = detail::kLtMaxCandidates;
  EXPECT_THROW(plan_linear(4096, 512, 2048, 3, o), Error);
}

// $KBIT_LINEAR_CONFIGS: the user's tables (kbit tune --out FILE) come before the compiled one.
TEST(LinearConfigs, UserTablesLoadInOrderAndComeFirst) {
  const auto dir = test::temp_dir("user_tables");
  auto config = [](int64_t m, int splits) {
    detail::LinearConfig c;
    c.device = "GPU X", c.bits = 4, c.n = 4096, c.k = 2048, c.m = m, c.splits = splits;
    return c;
  };
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  std::ofstream(a) << detail::linear_configs_to_json({config(16, 2)});
  std::ofstream(b) << detail::linear_configs_to_json({config(16, 3), config(4, 5)});
  const auto user = detail::load_linear_config_files(a + "::" + b + ":");  // empty parts are skipped
  ASSERT_EQ(user.size(), 3u);
  EXPECT_EQ(user[0].splits, 2);
  EXPECT_EQ(user[1].splits, 3);
  const std::vector<detail::LinearConfig> compiled{config(16, 7), config(64, 8)};
  EXPECT_EQ(detail::find_linear_config(user, compiled, "GPU X", 4, 4096, 2048, 12)->splits, 2);  // the first file
  EXPECT_EQ(detail::find_linear_config(user, compiled, "GPU X", 4, 4096, 2048, 3)->splits, 5);
  EXPECT_EQ(detail::find_linear_config(user, compiled, "GPU X", 4, 4096, 2048, 40)->splits, 8);  // compiled
  EXPECT_EQ(detail::find_linear_config(user, compiled, "GPU Y", 4, 4096, 2048, 12), nullptr);

  // Through the variable; unset, no user entries.
  ASSERT_EQ(setenv(detail::kLinearConfigsEnv, (b + ":" + a).c_str(), 1), 0);
  const auto from_env = detail::read_user_linear_configs();
  ASSERT_EQ(from_env.size(), 3u);
  EXPECT_EQ(from_env[0].splits, 3);
  ASSERT_EQ(unsetenv(detail::kLinearConfigsEnv), 0);
  EXPECT_TRUE(detail::read_user_linear_configs().empty());

  // A missing or malformed file is an error naming the variable and the file.
  const std::string missing = (dir / "missing.json").string();
  try {
    detail::load_linear_config_files(a + ":" + missing);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), std::string("KBIT_LINEAR_CONFIGS: ") + missing + ": cannot open the tuned table");
  }
  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << "{\"entries\": [{\"bits\": 4}]}";
  try {
    detail::load_linear_config_files(bad);
    ADD_FAILURE() << "no error for a malformed file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KBIT_LINEAR_CONFIGS: " + bad + ": linear config table: "), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Every entry of the compiled table (data/linear_configs.json) is a plan that kbit::linear or
// skinny_gemm accepts as it stands: a hand edit or a tune on another build cannot leave an entry
// that fails only when its shape is first called on that GPU.
TEST(LinearConfigs, EveryCompiledEntryIsAValidPlan) {
  const auto table = detail::parse_linear_configs(generated::kLinearConfigsJson);
  ASSERT_GT(table.size(), 100u);
  for (const auto& c : table) {
    SCOPED_TRACE(detail::concat(c.device, " bits=", c.bits, " n=", c.n, " k=", c.k, " m=", c.m, " pdl=", c.pdl));
    if (c.bits == 16) {
      const SkinnyPlan p = plan_skinny(c.m, c.n, c.k, bench::skinny_options_of(c));
      EXPECT_GT(p.splits, 0);
      continue;
    }
    LinearOptions o;
    o.path = c.path;
    o.pdl = c.pdl;
    if (c.path == LinearPath::fused_mma) o.n_tiles = c.n_tiles, o.warps = c.warps, o.splits = c.splits, o.items = c.items;
    if (c.path == LinearPath::dequant_cublas) o.gemm_algo = c.gemm_algo;
    LinearPlan p;
    ASSERT_NO_THROW(p = plan_linear(c.m, c.n, c.k, c.bits, o));
    EXPECT_EQ(p.path, c.path);
    if (c.path == LinearPath::dequant_cublas) EXPECT_EQ(p.gemm_algo, c.gemm_algo);
    if (c.path != LinearPath::fused_mma) continue;
    EXPECT_EQ(p.n_tiles, c.n_tiles);
    EXPECT_EQ(p.warps, c.warps);
    EXPECT_EQ(p.items, c.items);
    // What the tune timed is what runs: the table's split count survives normalisation
    // (stream-K items cut K themselves and record 1).
    EXPECT_EQ(p.splits, c.splits);
  }
}

TEST(LinearConfigs, PdlEntriesServePdlRequestsFirstAndOnlyThem) {
  detail::LinearConfig plain;
  plain.device = "GPU X", plain.bits = 16, plain.n = 7168, plain.k = 3584, plain.m = 16, plain.n_tiles = 2;
  plain.loader = SkinnyLoader::async, plain.stages = 2, plain.kslice = 64;
  detail::LinearConfig chained = plain;
  chained.pdl = true, chained.stripes = 2, chained.stages = 4;
  detail::LinearConfig plain_small = plain;
  plain_small.m = 8, plain_small.n_tiles = 1, plain_small.kslice = 128;
  const auto back = detail::parse_linear_configs(detail::linear_configs_to_json({plain, chained, plain_small}));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_TRUE(back[1].pdl);
  EXPECT_FALSE(back[0].pdl);
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 16, 7168, 3584, 12, true)->stripes, 2);  // the PDL entry
  EXPECT_EQ(detail::find_linear_config(back, "GPU X", 16, 7168, 3584, 12, false)->stripes, 1);
  EXPECT_FALSE(detail::find_linear_config(back, "GPU X", 16, 7168, 3584, 12)->pdl);
  // No PDL entry for M = 8: a PDL request falls back to the plain entry.
  const auto* fallback = detail::find_linear_config(back, "GPU X", 16, 7168, 3584, 8, true);
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(fallback->kslice, 128);
  EXPECT_FALSE(fallback->pdl);
  // A PDL entry the caller cannot use (skinny: another token-tile count) falls back to the
  // plain entry that it can.
  const auto two_tiles_only = [](const detail::LinearConfig& e) { return e.n_tiles == 2; };
  detail::LinearConfig chained_one_tile = chained;
  chained_one_tile.n_tiles = 1;
  const std::vector<detail::LinearConfig> mixed{plain, chained_one_tile};
  const auto* usable = detail::find_linear_config(mixed, "GPU X", 16, 7168, 3584, 12, true, two_tiles_only);
  ASSERT_NE(usable, nullptr);
  EXPECT_FALSE(usable->pdl);
  EXPECT_EQ(detail::find_linear_config(mixed, "GPU X", 16, 7168, 3584, 12, false, [](const auto&) { return false; }),
            nullptr);
  // A tune merge replaces an entry of the same launch kind only.
  detail::LinearConfig retuned = chained;
  retuned.stages = 3;
  const auto merged = bench::merge_linear_configs(back, {retuned});
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(detail::find_linear_config(merged, "GPU X", 16, 7168, 3584, 16, true)->stages, 3);
  EXPECT_EQ(detail::find_linear_config(merged, "GPU X", 16, 7168, 3584, 16, false)->stages, 2);
}

TEST(LinearConfigs, TuneMergeReplacesTheSameCaseAndKeepsOthers) {
  detail::LinearConfig a;
  a.device = "GPU X", a.bits = 4, a.n = 64, a.k = 128, a.m = 1, a.splits = 1;
  detail::LinearConfig b = a;
  b.device = "GPU Y";
  detail::LinearConfig a2 = a;
  a2.splits = 7;
  const auto merged = bench::merge_linear_configs({a, b}, {a2});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(detail::find_linear_config(merged, "GPU X", 4, 64, 128, 1)->splits, 7);
  EXPECT_EQ(detail::find_linear_config(merged, "GPU Y", 4, 64, 128, 1)->splits, 1);
}

}  // namespace
}  // namespace kbit
