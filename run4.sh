# tune glm47 k = 3, 5 into the table, rebuild with it, run every GPU test, bench glm47
timeout 260 build-dev/kbit tune --model glm47 --m 1,2,4,8,16 --bits 3,5 --out data/linear_configs.json > $OUT/tune35.txt 2> $OUT/tune35_progress.txt
echo "tune rc=$?"; cp data/linear_configs.json $OUT/linear_configs.json; tail -2 $OUT/tune35.txt
ninja -C build-dev kbit tests/kbit_gpu_tests > $OUT/rebuild.log 2>&1; echo "rebuild rc=$?"
(cd build-dev && timeout 150 ctest -L gpu --output-on-failure --timeout 120 -j4) > $OUT/ctest_gpu.log 2>&1
echo "ctest rc=$?"; grep -E "tests passed|Failed|FAILED|Timeout" $OUT/ctest_gpu.log | head -12
timeout 200 build-dev/kbit bench --model glm47 --m 1,2,4,8,16 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear --no-routed-moe --json $OUT/glm47_all.jsonl > $OUT/glm47_all.txt 2> $OUT/glm47_all_progress.txt
echo "bench rc=$?"; grep -E "^glm47|^TOTAL|^M =" $OUT/glm47_all.txt | head -80
