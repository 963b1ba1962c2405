# Copy of /work/wt/req/hgemm5.sh (session 10): `OUT=DIR sh bench/hg3/ceiling.sh` from the root, on the GPU.
# hgemm5 (issue 14): the mma.sync ceiling under sustained load, and the 4-stage variant of the
# automatic f16 GEMM against the automatic one (bench/hg3/auto_s4.fus, UNMEASURED so far).
# Writes nothing to $OUT but scratch (deleted).
set -u
W=$OUT/w; mkdir -p $W
t0=$(date +%s)
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
build/fusc examples/gemm/auto_hgemm.fus --arch=sm_90 --emit=cuda -o $W/base.cu || echo "emit base failed"
build/fusc bench/hg3/auto_s4.fus --arch=sm_90 --emit=cuda -o $W/s4.cu || echo "emit s4 failed"
( nvcc -O3 -arch=sm_90 -o $W/peak bench/hg3/mma_peak.cu && nvcc -O3 -arch=sm_90 -DBF16 -o $W/peakb bench/hg3/mma_peak.cu && nvcc -O3 -arch=sm_90 -DPER_SM=1 -o $W/peak1 bench/hg3/mma_peak.cu ) > $W/c0.log 2>&1 &
for v in base s4; do
  timeout 50 nvcc -O3 -arch=sm_90 -DKFILE="\"$W/$v.cu\"" -DLAUNCH=auto_hgemm -o $W/h_$v bench/hg3/harness.cu > $W/c_$v.log 2>&1 &
done
wait; tail -3 $W/c*.log; echo "t=$(( $(date +%s) - t0 )) compiled"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 > $W/smi_$1.txt & SMI=$!; }
smi_end() { kill $SMI; awk -F, -v n=$1 '{c[NR]=$1; p[NR]=$2} END {lo=1e9; hi=0; pm=0; for (i=1;i<=NR;i++) {if (c[i]<lo) lo=c[i]; if (c[i]>hi) hi=c[i]; if (p[i]>pm) pm=p[i]}; printf "  %s: nvidia-smi %d samples, SM clock %d..%d MHz, last %d MHz, max power %.0f W\n", n, NR, lo, hi, c[NR], pm}' $W/smi_$1.txt; }
smi peak; timeout 15 $W/peak; smi_end peak
sleep 1
smi peakb; timeout 15 $W/peakb; smi_end peakb
sleep 1
smi peak1; timeout 15 $W/peak1; smi_end peak1
echo "t=$(( $(date +%s) - t0 ))"
# correctness first (maxerr against the naive kernel; K, N multiples of 8 for the raw launcher)
timeout 10 $W/h_s4 300 264 72 x; timeout 10 $W/h_s4 4095 4104 4096 x
for v in base s4; do
  sleep 1; smi ${v}20; HG_IT=20 timeout 10 $W/h_$v 4096; smi_end ${v}20
  sleep 1; smi ${v}600; HG_IT=600 timeout 10 $W/h_$v 4096; smi_end ${v}600
done
echo "t=$(( $(date +%s) - t0 ))"
timeout 12 build/fusc run bench/hg3/auto_s4.fus --dims M=37,N=136,K=24 2>&1 | tail -2
timeout 12 build/fusc run bench/hg3/auto_s4.fus --dims M=1001,N=520,K=264 2>&1 | tail -2
echo "t=$(( $(date +%s) - t0 ))"
rm -rf $W
