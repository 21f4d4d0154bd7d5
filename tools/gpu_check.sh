#!/usr/bin/env bash
# primflow on an NVIDIA GPU, in one run: installs ".[gpu,test]" into a virtual environment,
# runs the CuPy cells of the OpInfo matrix (tests/test_opinfo_matrix.py --matrix=full), the
# plate demo on the GPU and on the CPU, and the W2/W3 benchmarks with the CuPy backend and
# with the NumPy backend, then prints one summary line (the last line of its output).
#
# Usage: tools/gpu_check.sh [--venv DIR] [--out DIR] [--python PYTHON]
#   --venv DIR      the virtual environment to create or reuse (default: .venv-gpu)
#   --out DIR       where the logs go (default: gpu-check)
#   --python PYTHON the interpreter that creates the environment (default: python3)
#
# Without an NVIDIA GPU it says so and exits 0. Exit status 1: something failed (the summary
# and the logs in --out say what).

set -euo pipefail

venv=".venv-gpu"
out="gpu-check"
python="python3"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --venv) venv=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --python) python=$2; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU on this machine (nvidia-smi finds none): nothing to check." \
         "The CuPy cells of the OpInfo matrix skip with that reason; run this script where a" \
         "GPU is present."
    exit 0
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "gpu_check: $gpu; logs in $out"

# ---- the environment --------------------------------------------------------------------------
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
py="$venv/bin/python"
if ! "$py" -m pip install -q -e ".[gpu,test]" >"$out/install.log" 2>&1; then
    echo "gpu_check: FAILED: pip install -e '.[gpu,test]' (see $out/install.log)"
    exit 1
fi
if ! "$py" -c "import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0" \
        >"$out/cupy.log" 2>&1; then
    echo "gpu_check: FAILED: CuPy is installed but sees no GPU (see $out/cupy.log)"
    exit 1
fi

status=0

# ---- the CuPy cells of the OpInfo matrix -----------------------------------------------------
# (pytest's last line: "N passed, M skipped, K failed in T s")
"$py" -m pytest -q -p no:cacheprovider tests/test_opinfo_matrix.py --matrix=full \
    -k "cupy" -rfs >"$out/matrix.log" 2>&1 || status=1
matrix=$(tail -n 1 "$out/matrix.log" | tr -d '=' | sed 's/^ *//; s/ *$//')

# ---- the plate demo, on the GPU and on the CPU ------------------------------------------------
demo() {  # demo DEVICE: runs `primflow demo plate --quick` on DEVICE; prints "seconds error"
    local device=$1 start end
    start=$(date +%s)
    if ! "$py" -c "import sys, primflow as pf
pf.set_device(sys.argv[1])
from primflow.cli import main
sys.exit(main(['demo', 'plate', '--quick', '--no-plots', '--no-progress', '--overwrite',
               '--out', sys.argv[2]]))" "$device" "$out/plate-$device" \
            >"$out/plate-$device.log" 2>&1; then
        echo "failed -"
        return 1
    fi
    end=$(date +%s)
    local error
    error=$(grep -io 'relative L2[^0-9]*[0-9.eE+-]*' "$out/plate-$device.log" | tail -n 1 \
            | grep -o '[0-9.eE+-]*$' || true)
    echo "$((end - start)) ${error:-?}"
}
read -r plate_gpu_s plate_gpu_err < <(demo gpu || true)
read -r plate_cpu_s plate_cpu_err < <(demo cpu || true)
[[ $plate_gpu_s == failed ]] && status=1

# ---- W2 and W3: the CuPy backend against the NumPy backend -----------------------------------
bench() {  # bench DEVICE WORKLOAD CONFIG: the median in ms, or "error"
    local device=$1 workload=$2 config=$3 log
    log="$out/bench-$workload-$config-$device.log"
    "$py" -c "import runpy, sys, primflow as pf
pf.set_device(sys.argv[1])
sys.argv = ['bench.run_one'] + sys.argv[2:]
runpy.run_module('bench.run_one', run_name='__main__')" "$device" "$workload" primflow \
        "$config" --quick >"$log" 2>&1 || true
    "$py" -c "import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('BENCH_RESULT ')]
res = json.loads(lines[-1][len('BENCH_RESULT '):]) if lines else {}
print(f\"{res['value']:.2f}\" if res.get('status') == 'ok' else 'error')" "$log"
}
benches=""
for case in "W2 collapsed_1024" "W3 collapsed"; do
    read -r workload config <<<"$case"
    on_gpu=$(bench gpu "$workload" "$config")
    on_cpu=$(bench cpu "$workload" "$config")
    if [[ $on_gpu == error || $on_cpu == error ]]; then
        status=1
        ratio="?"
    else
        ratio=$("$py" -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" \
                "$on_cpu" "$on_gpu")
    fi
    benches+="; $workload $config: cupy $on_gpu ms, numpy $on_cpu ms (x$ratio)"
done

result=$([[ $status == 0 ]] && echo OK || echo FAILED)
echo "gpu_check: $result on $gpu: matrix cupy cells: $matrix; plate demo: gpu" \
     "${plate_gpu_s}s (rel. L2 ${plate_gpu_err}), cpu ${plate_cpu_s}s (rel. L2" \
     "${plate_cpu_err})$benches"
exit "$status"
