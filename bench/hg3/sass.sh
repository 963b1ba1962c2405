# sh bench/hg3/sass.sh NAME FILE.fus: ptxas registers and the mainloop mix of FILE's kernel
n=$1; f=$2
build/fusc $f --emit=cuda > $OUT/$n.cu 2>/dev/null || { echo "$n: emit failed"; exit 0; }
timeout 40 nvcc -cubin -O3 -arch=sm_90 -Xptxas -v -o $OUT/$n.cubin $OUT/$n.cu 2>&1 | grep -E 'registers|spill' | head -4
cuobjdump -sass $OUT/$n.cubin > $OUT/$n.sass
echo "$n:"; python3 bench/sass_loop.py $OUT/$n.sass
rm -f $OUT/$n.cubin
