#!/usr/bin/env bash
# End-to-end CPU cost: the load generator sends the same spans over OTLP/gRPC to a benchmark build
# holding both components, once with window_aggregator and once with span_metrics in the pipeline
# (count, sum and an exponential histogram, grouped by service.name, span.name and
# http.request.method), and reports the collector's CPU seconds per million spans and the ratio. A third
# run with the receiver alone (baseline.yaml) gives what each component adds on top of it.
# Usage: scripts/bench-e2e/run.sh [spans per run, default 1000000] [rate per second, default 50000]
#        [rounds, default 1: the three runs in turn, this many times; the medians are reported]
# With PROFILE=1 each run also serves pprof and a 10 s CPU profile of its middle is saved in
# _build/bench-<config>.pprof (read it with: go tool pprof -top _build/bench-window_aggregator.yaml.pprof).
set -euo pipefail
cd "$(dirname "$0")"
export GOTOOLCHAIN=local
spans=${1:-1000000}
rate=${2:-50000}
rounds=${3:-1}
root=../..
mkdir -p "$root/_build"
go run go.opentelemetry.io/collector/cmd/builder@v0.165.0 --config builder-config.yaml >/dev/null 2>&1
(cd "$root" && go build -o _build/loadgen ./cmd/loadgen)
bin=$root/_build/otelcol-bench/otelcol-bench
duration=$(( (spans + rate - 1) / rate ))s

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

measure() {
  local config=$1 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local extra=() pport=""
  if [ "${PROFILE:-}" = 1 ]; then
    pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    extra=(--set "extensions::pprof::endpoint=127.0.0.1:$pport" --set "service::extensions=[pprof]")
  fi
  BENCH_PORT=$port "$bin" --config "$config" "${extra[@]}" >"$root/_build/bench-$config.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  local before after
  before=$(cpu_ticks "$pid")
  local prof=""
  if [ -n "$pport" ]; then
    (sleep $(( (spans / rate) / 2 > 5 ? (spans / rate) / 2 - 5 : 0 )) &&
      curl -s -o "$root/_build/bench-$config.pprof" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=10") &
    prof=$!
  fi
  "$root/_build/loadgen" -endpoint "127.0.0.1:$port" -signals spans -rate "$rate" -batch 1000 \
    -services 10 -series 20 -duration "$duration" >"$root/_build/bench-loadgen-$config.log" 2>&1
  after=$(cpu_ticks "$pid")
  if [ -n "$prof" ]; then wait "$prof"; fi
  kill -TERM "$pid"; wait "$pid" || true
  local sent
  sent=$(grep -o 'spans=[0-9]*' "$root/_build/bench-loadgen-$config.log" | tail -1 | cut -d= -f2)
  python3 -c "import os; t=($after-$before)/os.sysconf('SC_CLK_TCK'); print(f'$config: {t:.2f} CPU s for $sent spans = {t*1e6/$sent:.3f} CPU s per million spans')" | tee -a "$root/_build/bench-e2e.txt"
}

: >"$root/_build/bench-e2e.txt"
for _ in $(seq 1 "$rounds"); do
  measure baseline.yaml
  measure window_aggregator.yaml
  measure span_metrics.yaml
done
python3 - "$root/_build/bench-e2e.txt" <<'PY'
import re, statistics, sys
runs = {}
for l in open(sys.argv[1]):
    runs.setdefault(l.split(':')[0], []).append(float(re.search(r'= ([0-9.]+) CPU s per million', l).group(1)))
v = {k: statistics.median(x) for k, x in runs.items()}
print(f"medians of {len(runs['baseline.yaml'])} round(s): " + ", ".join(f"{k} {x:.3f}" for k, x in v.items()))
wa, sm, base = v['window_aggregator.yaml'], v['span_metrics.yaml'], v['baseline.yaml']
print(f"span_metrics / window_aggregator CPU per span: {sm / wa:.2f}x")
print(f"above the receiver alone: window_aggregator {wa - base:.3f}, span_metrics {sm - base:.3f} CPU s per million spans"
      + (f" ({(sm - base) / (wa - base):.2f}x)" if wa > base else ""))
PY
