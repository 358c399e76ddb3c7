# the issue-4 tables for qwen3 and kimi at M <= 16, the skinny dense projections, all models at M >= 32
timeout 130 build-dev/kbit bench --model qwen3_coder_next,kimi_k3_latent --m 1,2,4,8,16 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear --no-routed-moe --json $OUT/qk_small.jsonl > $OUT/qk_small.txt 2> $OUT/qk_small_progress.txt
echo "small rc=$?"; grep -E "^TOTAL" $OUT/qk_small.txt
timeout 90 build-dev/kbit bench --model all --m 1,2,4,8,12,16 --bits 4 --backend cublas_bf16,kbit_skinny --no-routed-moe --json $OUT/skinny_dense.jsonl > $OUT/skinny_dense.txt 2> $OUT/skinny_dense_progress.txt
echo "skinny rc=$?"
timeout 200 build-dev/kbit bench --model all --m 32,64,512,4096 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear --no-routed-moe --json $OUT/all_large.jsonl > $OUT/all_large.txt 2> $OUT/all_large_progress.txt
echo "large rc=$?"; grep -E "^TOTAL" $OUT/all_large.txt; wc -l $OUT/all_large_progress.txt
