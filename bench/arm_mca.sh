#!/usr/bin/env bash
# Static throughput of the aarch64 matrix-product micro-kernels with llvm-mca:
# compiles gemm_neon.cpp / gemm_dotprod.cpp / gemm_i8mm.cpp to assembly with
# the markers of gemm_neon.inl on (-DTERN_MCA_MARKERS: `# LLVM-MCA-BEGIN`/`END`
# around one group of the GEMM and GEMV loops; the markers are compiled out of
# normal builds), cuts each kernel instance's loop body out and prints llvm-mca's
# cycles per group, also per row x tile x group (256 multiply-adds) for the GEMM
# and per tile x group for the GEMV.
#   bench/arm_mca.sh [cpu...]   default: neoverse-n2 apple-m1 cortex-a76
# Needs aarch64-linux-gnu-g++ and llvm-mca (LLVM_MCA, else llvm-mca-16, -14;
# ARM64_SYSROOT or .cache/sysroot-arm64 for the C++ headers). Of these CPUs
# LLVM 14 models only apple-m1 (dispatch width 6): neoverse-n2, neoverse-n1,
# cortex-a76 (and v1, x1) all get the Cortex-A57 model (dispatch width 3,
# identical numbers) -- not N2 or A76 figures; LLVM 16 adds a real neoverse-n2.
# Spills (vector loads/stores on the stack inside a loop) are counted too: any
# is a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(neoverse-n2 apple-m1 cortex-a76)
sysroot=${ARM64_SYSROOT:-$PWD/.cache/sysroot-arm64}
[ -d "$sysroot" ] || sysroot=/work/main/.cache/sysroot-arm64
mca=${LLVM_MCA:-$(command -v llvm-mca-16 || command -v llvm-mca-14 || command -v llvm-mca)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

declare -A march=([neon]="" [dotprod]="-march=armv8.2-a+dotprod" [i8mm]="-march=armv8.2-a+dotprod+i8mm")
printf '%-8s %-12s %-26s %6s' table cpu kernel spills
printf '  %10s %12s\n' cyc/group "cyc/unit"
for isa in neon dotprod i8mm; do
  aarch64-linux-gnu-g++ --sysroot="$sysroot" -Iinclude -O3 -DNDEBUG -std=c++20 -ffp-contract=off \
    ${march[$isa]} -DTERN_MCA_MARKERS -S -o "$out/$isa.s" "src/kernels/gemm_$isa.cpp"
  python3 bench/arm_mca_extract.py "$out/$isa.s" "$out/$isa" | sort -k3,3 -k5,5 -k6,6n |
    while IFS=$'\t' read -r file spills kernel dot fmt n; do
      # the full shapes only (the remainder instances are the same loops, shorter)
      case "$isa/$kernel/$n" in
        neon/tile_kernel/3 | neon/gemv_kernel/2 | dotprod/tile_kernel/4 | dotprod/gemv_kernel/4 | \
          i8mm/tile_kernel/4) ;;
        *) continue ;;
      esac
      for cpu in "${cpus[@]}"; do
        r=$("$mca" -mtriple=aarch64 -mcpu="$cpu" -mattr=+dotprod,+i8mm -iterations=200 "$file" 2>/dev/null |
          awk '/^Iterations:/ {it=$2} /^Total Cycles:/ {c=$3} END {if (it) printf "%.1f", c / it}')
        unit=$(awk -v c="$r" -v n="$n" 'BEGIN {printf "%.2f", c / n}')
        printf '%-8s %-12s %-26s %6s  %10s %12s\n' "$isa" "$cpu" "${kernel%_kernel} ${fmt%Fmt} x$n" \
          "$spills" "$r" "$unit"
      done
    done
done
echo "cyc/unit: GEMM cycles per activation row x tile (8 channels) x group (32 inputs);"
echo "          GEMV cycles per tile x group (in practice bound by memory bandwidth)."
