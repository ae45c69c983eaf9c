#!/usr/bin/env bash
# One lent-GPU call of the project's own GPU figures (issue 39), on a bare CUDA machine with the wheels of
# ../shared/gpu-kit carried in .whl/ (transformers 5.24 among them, as on the CPU side). From the repo root:
#   bash benchmarks/gpu_session.sh decode train3b partitions     # the first call (about 8 minutes)
#   bash benchmarks/gpu_session.sh fsdp2 lora7b packing          # the second
# Each part runs under its own time limit and writes what it measured under $OUT (logs cut to their ends).
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=$PWD:/tmp/site DAGSTER_HOME=/tmp/dh HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
WORK=/tmp/gt
mkdir -p "$WORK"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' \
  >> "$OUT/gpu.txt"
for part in "$@"; do
  started=$(date +%s)
  case $part in
    decode)
      timeout 230 python3 benchmarks/bench_decode.py --shape qwen2.5-vl-3b --build-dir "$WORK/qwen2.5-vl-3b" \
        --device cuda --sequences 40 --new-tokens 256 --repeats 1 --out "$OUT/decode.json" > "$WORK/decode.log" 2>&1
      code=$?
      ;;
    train3b|partitions|lora7b|fsdp2)
      timeout 300 python3 benchmarks/bench_gpu_train.py --device cuda --parts "$part" --work "$WORK" \
        --timeout-s 280 --out "$WORK/out-$part" > "$WORK/$part.out" 2>&1
      code=$?
      cp "$WORK/out-$part/bench_gpu_train.json" "$OUT/$part.json" 2>/dev/null
      tail -c 20000 "$WORK/$part.log" >> "$WORK/$part.out" 2>/dev/null
      ;;
    packing)
      timeout 150 python3 benchmarks/bench_packing.py --device cuda --model "$WORK/qwen2.5-vl-3b" \
        --dtype bfloat16 --out "$OUT/packing.json" > "$WORK/packing.log" 2>&1
      code=$?
      ;;
    *)
      code="unknown part"
      ;;
  esac
  echo "$part: exit $code in $(( $(date +%s) - started )) s" | tee -a "$OUT/parts.txt"
  tail -c 12000 "$WORK/$part.out" "$WORK/$part.log" 2>/dev/null > "$OUT/$part.log"
done
nvidia-smi --query-gpu=memory.used --format=csv,noheader >> "$OUT/gpu.txt"
