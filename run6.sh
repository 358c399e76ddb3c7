# Nsight Compute at M = 16: the fused k-bit kernel on glm47.q (k = 4, the table's plan) and the skinny async r=2 on Kimi
timeout 120 ncu --kernel-name regex:fused_linear_kernel --launch-skip 3 --launch-count 1 --set full build-dev/kbit bench --model glm47 --m 16 --bits 4 --backend kbit_linear --no-routed-moe --repeats 3 > $OUT/ncu_fused_q_m16.txt 2>&1; echo "ncu fused rc=$?"
grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Grid Size|Block Size|L1/TEX Hit|L2 Hit|DRAM Throughput|Memory Throughput|stalled|spends" $OUT/ncu_fused_q_m16.txt | head -30
timeout 100 ncu --kernel-name regex:skinny_stream --launch-skip 3 --launch-count 1 --set full build-dev/kbit tune skinny --mode selected --m 16 --repeats 3 > $OUT/ncu_skinny_m16_r2.txt 2>&1; echo "ncu skinny rc=$?"
grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|L1/TEX Hit|L2 Hit|DRAM Throughput|stalled|spends" $OUT/ncu_skinny_m16_r2.txt | head -20
