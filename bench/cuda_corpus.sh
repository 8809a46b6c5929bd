#!/bin/bash
# The CUDA corpus (tests/realbugs/cuda) on the lent GPU machine, one bug at a time, within a total time.
# usage: bash bench/cuda_corpus.sh BUG1,BUG2,... SECONDS_PER_BUG TOTAL_SECONDS
# That machine reaches no registry: pt2doctor's dependencies travel as wheels in .whl/ (ignored), made here with
#   pip download -q -d .whl --python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform any click rich msgspec jinja2 dill pysource-minimize expecttest
# and carried (`run` with carry [".whl"]). Each bug's diagnosis goes to $OUT/rb/BUG/, its output to $OUT/BUG.log;
# the device tool brings back at most 16 MiB a file, so pack the diagnosis.json files and logs, not the run folders:
#   cd $OUT && tar czf r.tgz rb/*/diagnosis.json *.log; find . -type f ! -name r.tgz -delete
set -u
cd "$(dirname "$0")/.."
python -m pip install -q --root-user-action=ignore --no-index --find-links .whl click rich msgspec jinja2 dill \
  pysource-minimize expecttest 2>&1 | tail -3
export PYTHONPATH=$PWD/src CI=true
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader; nproc
python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
start=$(date +%s)
IFS=, read -ra bugs <<< "$1"
for b in "${bugs[@]}"; do
  now=$(date +%s); left=$(( $3 - (now - start) ))
  if [ "$left" -lt 90 ]; then echo "skip $b: $left s left"; continue; fi
  t=$2; [ "$left" -lt "$t" ] && t=$left
  python bench/realbugs.py --corpus tests/realbugs/cuda --only "$b" --timeout "$t" --out "$OUT/rb" > "$OUT/$b.log" 2>&1
  echo "$b: $(( $(date +%s) - now )) s"
done
