#!/usr/bin/env bash
# End-to-end CPU cost: the load generator sends the same spans over OTLP/gRPC to a benchmark build
# holding both components, once with window_aggregator and once with span_metrics in the pipeline
# (count, sum and an exponential histogram in 15 s windows or flushes, grouped by service.name, span.name and
# http.request.method), and reports the collector's CPU seconds per million spans and the ratio. A third
# run with the receiver alone (baseline.yaml) gives what each component adds on top of it.
# Usage: scripts/bench-e2e/run.sh [spans per run, default 1000000] [rate per second, default 50000]
#        [rounds, default 1: the three runs in turn, this many times; the medians are reported]
#
# Two measures per run:
#  - the collector's CPU seconds per million spans, from /proc, compared with a run with the receiver
#    alone. It includes everything, garbage collection too, but the receiver's own run-to-run noise
#    (about ±0.2 CPU s per million spans) is as large as what the components add;
#  - the component's own CPU per million spans: each run is profiled (pprof extension, CPU profile of
#    all but the first and last 2 s) and the share of samples with a frame of the component
#    (github.com/windowaggregator/... or spanmetricsconnector) is applied to the run's CPU. This is
#    free of the receiver's noise but leaves out the background garbage collection that the
#    component's allocations cause, which understates span_metrics (3 allocations per span) more than
#    window_aggregator. Its precision is that of the sample count (100 per CPU second): the summary
#    gives it. On a shared machine the sample counts themselves swing between runs (the receiver's
#    decoding of the same spans got from 0.2 to 1.9 s of samples), so the summary also gives each
#    component's samples per sample of the receiver's decoding, which that cancels.
# The profiles are kept in _build/bench-<config>-<round>.pprof (go tool pprof -top <file>).
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
seconds=$(( (spans + rate - 1) / rate ))
duration=${seconds}s
profile_seconds=$(( seconds > 6 ? seconds - 4 : 2 ))

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

measure() {
  local config=$1 round=$2 port pport
  port=$(free_port)
  pport=$(free_port)
  BENCH_PORT=$port "$bin" --config "$config" --set "extensions::pprof::endpoint=127.0.0.1:$pport" \
    --set "service::extensions=[pprof]" >"$root/_build/bench-$config.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  local before after prof_file="$root/_build/bench-$config-$round.pprof" prof
  before=$(cpu_ticks "$pid")
  (sleep 2 && curl -s -o "$prof_file" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=$profile_seconds") &
  prof=$!
  "$root/_build/loadgen" -endpoint "127.0.0.1:$port" -signals spans -rate "$rate" -batch 1000 \
    -services 10 -series 20 -duration "$duration" >"$root/_build/bench-loadgen-$config.log" 2>&1
  after=$(cpu_ticks "$pid")
  wait "$prof"
  kill -TERM "$pid"; wait "$pid" || true
  local sent focus="" line=""
  sent=$(grep -o 'spans=[0-9]*' "$root/_build/bench-loadgen-$config.log" | tail -1 | cut -d= -f2)
  case $config in
    window_aggregator.yaml) focus='^github\.com/windowaggregator/' ;;
    span_metrics.yaml) focus='spanmetricsconnector' ;;
  esac
  # "Showing nodes accounting for 0.24s, 22.22% of 1.08s total": the samples with a frame of the
  # component (or of the receiver's decoding), and their share of every sample.
  shown() {
    go tool pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 -focus "$1" "$prof_file" 2>/dev/null |
      grep '^Showing nodes accounting for' || true
  }
  if [ -n "$focus" ]; then line=$(shown "$focus"); fi
  decode=$(shown 'ExportTraceServiceRequest\)\.UnmarshalProto')
  python3 - "$config" "$(( after - before ))" "$sent" "$line" "$decode" <<'PY' | tee -a "$root/_build/bench-e2e.txt"
import os, re, sys
config, ticks, sent, line, decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
t = ticks / os.sysconf('SC_CLK_TCK')
out = f"{config}: {t:.2f} CPU s for {sent} spans = {t * 1e6 / sent:.3f} CPU s per million spans"
def parse(l):
    m = re.search(r'accounting for ([0-9.]+)(ns|us|ms|s|mins|hrs), ([0-9.]+)% of', l)
    if not m:
        return None
    secs = float(m.group(1)) * {'ns': 1e-9, 'us': 1e-6, 'ms': 1e-3, 's': 1, 'mins': 60, 'hrs': 3600}[m.group(2)]
    return secs * 100, float(m.group(3)) / 100  # samples (100 per CPU second), share of all samples
c, d = parse(line), parse(decode)
if c:
    out += f"; component: {c[1]:.2%} of samples ({c[0]:.0f}) = {c[1] * t * 1e6 / sent:.3f} CPU s per million spans"
    if d and d[0] > 0:
        out += f"; component/decoding: {c[0] / d[0]:.3f} ({d[0]:.0f} decoding samples)"
elif config != 'baseline.yaml':
    out += "; component: no samples"
print(out)
PY
}

: >"$root/_build/bench-e2e.txt"
for round in $(seq 1 "$rounds"); do
  measure baseline.yaml "$round"
  measure window_aggregator.yaml "$round"
  measure span_metrics.yaml "$round"
done
python3 - "$root/_build/bench-e2e.txt" <<'PY'
import re, statistics, sys
runs, own, samples, perdec = {}, {}, {}, {}
for l in open(sys.argv[1]):
    k = l.split(':')[0]
    runs.setdefault(k, []).append(float(re.search(r'= ([0-9.]+) CPU s per million spans', l).group(1)))
    m = re.search(r'of samples \(([0-9]+)\) = ([0-9.]+) CPU s per million', l)
    if m:
        samples[k] = samples.get(k, 0) + int(m.group(1))
        own.setdefault(k, []).append(float(m.group(2)))
    m = re.search(r'component/decoding: ([0-9.]+)', l)
    if m:
        perdec.setdefault(k, []).append(float(m.group(1)))
v = {k: statistics.median(x) for k, x in runs.items()}
print(f"medians of {len(runs['baseline.yaml'])} round(s): " + ", ".join(f"{k} {x:.3f}" for k, x in v.items()))
wa, sm, base = v['window_aggregator.yaml'], v['span_metrics.yaml'], v['baseline.yaml']
print(f"span_metrics / window_aggregator CPU per span: {sm / wa:.2f}x")
print(f"above the receiver alone: window_aggregator {wa - base:.3f}, span_metrics {sm - base:.3f} CPU s per million spans"
      + (f" ({(sm - base) / (wa - base):.2f}x)" if wa > base else ""))
def compare(title, per_run, unit, counts=None):
    """Prints both components' medians over the rounds, their ranges and the ratio."""
    if not ('window_aggregator.yaml' in per_run and 'span_metrics.yaml' in per_run):
        return
    def side(k):
        x = per_run[k]
        extra = f", {counts[k]} samples" if counts else ""
        return f"{k.removesuffix('.yaml')} {statistics.median(x):.3f} ({min(x):.3f}-{max(x):.3f}{extra})"
    wa, sm = (statistics.median(per_run[k]) for k in ('window_aggregator.yaml', 'span_metrics.yaml'))
    print(f"{title}: {side('window_aggregator.yaml')}, {side('span_metrics.yaml')}{unit}: {sm / wa:.2f}x")
compare("in the components' own frames (profiles; background GC left out)", own, " CPU s per million spans", samples)
# The receiver decodes the same spans in every run: the component's samples per decoding sample are
# meant to cancel how many samples a run got and how fast the machine was during it.
compare("the same, per sample of the receiver's decoding", perdec, "")
PY
