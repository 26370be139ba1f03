#!/bin/sh
# The heap model tests (Tests/CRunLoopCoreSuite/t_heap_model.c) alone, on timer_heap.c, with
# fault injection (some growths fail: parks in place in small arrays, -ENOMEM, compaction for
# room), ASan/UBSan and gcov; prints timer_heap.c's lines never run. From the repository root:
#   sh Tests/heap_model/run.sh [seeds...]      (HM_SEED per run; default: one run, seed 0)
set -e
root=$(pwd)
out=${OUT:-build/heap_model}
mkdir -p "$out"
cd "$out"
rm -f ./*.gcda ./*.gcov
${CC:-gcc} -std=c11 -O1 -g -D_GNU_SOURCE -DRL_FAULT_INJECTION --coverage -fsanitize=address,undefined \
    -fno-sanitize-recover=all -I"$root/Tests/CRunLoopCoreSuite/include" \
    "$root/Sources/CRunLoopCore/timer_heap.c" "$root/Sources/CRunLoopCore/fault.c" \
    "$root/Tests/CRunLoopCoreSuite/t_heap_model.c" "$root/Tests/heap_model/stub.c" -o heap_model -lm
for seed in ${@:-0}; do
    HM_SEED=$seed RLT_HEAP_MODEL_VERBOSE=1 ./heap_model
done
gcov -o . heap_model-timer_heap.gcda >/dev/null 2>&1 || true
echo "timer_heap.c lines never run (verify's failure returns left out):"
grep -n '#####' timer_heap.c.gcov | grep -v 'why = \|return false' || echo "  none"
