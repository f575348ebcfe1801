#!/usr/bin/env bash
# Runs the collector distribution on examples/demo.yaml and sends it demo traffic until Ctrl-C.
set -euo pipefail
dist=${1:-_build/otelcol-windowaggregator/otelcol-windowaggregator}
loadgen=${2:-_build/loadgen}
config=${DEMO_CONFIG:-examples/demo.yaml}

echo ">>> the operator's view: http://localhost:55680/ (W, its sources, the windows, records by outcome)" >&2
"$dist" --config "$config" &
collector=$!
gen=""
# stop ends the demo with status $1: 0 for Ctrl-C (how the demo is meant to end), else the failure's.
stop() {
  local rc=$1
  trap - INT TERM EXIT
  [ -n "$gen" ] && kill -TERM "$gen" 2>/dev/null && wait "$gen" 2>/dev/null || true
  # SIGTERM lets the collector fire its open windows before it exits.
  kill -TERM "$collector" 2>/dev/null && wait "$collector" 2>/dev/null || true
  exit "$rc"
}
trap 'stop 0' INT TERM
trap 'stop $?' EXIT

# Wait for the OTLP receiver.
for _ in $(seq 1 100); do
  if (echo > /dev/tcp/127.0.0.1/4317) 2>/dev/null; then break; fi
  kill -0 "$collector" 2>/dev/null || { echo "the collector did not start" >&2; exit 1; }
  sleep 0.1
done

# The collector judges its first batches against no watermark, so every record in them is on time,
# late or not: the load generator sends on-time records only for a 5 s warm-up, which sets the
# watermark from now, and mixes in the late ones after that.
echo ">>> demo traffic: 3 services, on-time only for a 5 s warm-up, then 2% of records 2 minutes late (routed), 5% 20 s late (late firings); 2 pods a service export their metrics every second" >&2
echo ">>> a line for each request of window results (every 10 s) and each batch of late records; press Ctrl-C to stop" >&2
"$loadgen" -endpoint 127.0.0.1:4317 -rate 100 -services 3 -series 2 -warm-up 5s -late 0.05 -late-by 20s -too-late 0.02 -too-late-by 2m -signals spans,logs,metrics -pods 2 -pod-restart 0.02 ${LOADGEN_FLAGS:-} &
gen=$!
rc=0
wait "$gen" || rc=$? # the load generator ends by itself only on an error
stop "$rc"
