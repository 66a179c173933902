K=$(cat /tmp/kpath)
for round in 1 2; do
for f in a_b8_h12_t512_d64_ctrue a_b1_h16_t1024_d64_ctrue a_b1_h16_t1024_d64_cfalse a_b1_h6_t1500_d64_cfalse a_b1_h32_t4096_d128_ctrue; do
  line="$f"
  for rows in 32 64 128 256 512; do
    case $f in *t4096*) r=3;; *) r=40;; esac
    ms=$(KB=100000000 KMAX=$rows $K bench $f.kiln --repeat $r --warmup 3 --threads 2 2>/dev/null | grep '^latency' | sed 's/.*median \([0-9.]*\).*/\1/')
    line="$line r$rows=$ms"
  done
  echo $line
done; done
