// kbit bench first-load: how long a kernel's first global loads take to arrive, by what is
// loaded and what else is in flight. The GEMV's probe puts x's data (requested first, a
// few KB per CTA) 2.5-2.7 us after entry while the expert offsets, requested after it,
// arrive by 1.5 us (BENCHMARKS.md, forty-first session); this separates the suspects: the
// load width, the buffer the data sits in, L2 residency, a flood of weight requests, and a
// flood of shared-memory stores (the GEMV's decode table) issued meanwhile.
#pragma once

namespace kbit::bench {

struct FirstLoadOptions {
  int iterations = 30;
};

void run_first_load_probe(const FirstLoadOptions& o);

}  // namespace kbit::bench
