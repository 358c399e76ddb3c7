for n in 6336 7168 8448; do
  build-dev/kbit tune skinny --mode selected --n $n --k 3584 --m 1,8 --config l=async,w=4,r=1,p=2,c=128,s=1 --json $OUT/imbalance_n$n.jsonl > $OUT/imbalance_n$n.txt 2>&1
  echo "N=$n"; grep -E "cublas|read_floor|kbit_skinny" $OUT/imbalance_n$n.txt
done
build-dev/kbit tune skinny --mode selected --n 6336 --k 3584 --m 16 --config l=async,w=4,r=2,p=2,c=64,s=2 > $OUT/imbalance_m16.txt 2>&1; grep kbit_skinny $OUT/imbalance_m16.txt
build-dev/kbit tune skinny --mode selected --n 7168 --k 3584 --m 16 --config l=async,w=4,r=2,p=2,c=64,s=2 >> $OUT/imbalance_m16.txt 2>&1; grep kbit_skinny $OUT/imbalance_m16.txt
timeout 200 build-dev/kbit bench --model glm47 --m 1,16 --bits 4 --json $OUT/glm47_bench.jsonl > $OUT/glm47_bench.txt 2> $OUT/glm47_bench_progress.txt; echo "bench rc=$?"
tail -45 $OUT/glm47_bench.txt
