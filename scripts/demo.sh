#!/usr/bin/env bash
# Runs windowprint, the collector distribution on examples/demo.yaml, and the load generator, until
# Ctrl-C: windowprint prints the windows' values on stdout; the others write to stderr.
# DEMO_OTLP, DEMO_PRINT and DEMO_VIEW (host:port) move the collector's OTLP receiver, windowprint and
# the operator's view off 127.0.0.1:4317, 127.0.0.1:4320 and localhost:55680.
set -euo pipefail
dist=${1:-_build/otelcol-windowaggregator/otelcol-windowaggregator}
loadgen=${2:-_build/loadgen}
windowprint=${3:-_build/windowprint}
config=${DEMO_CONFIG:-examples/demo.yaml}
otlp=${DEMO_OTLP:-127.0.0.1:4317}
print=${DEMO_PRINT:-127.0.0.1:4320}
view=${DEMO_VIEW:-localhost:55680}
sets=()
[ -n "${DEMO_OTLP:-}" ] && sets+=("--set=receivers::otlp::protocols::grpc::endpoint=$otlp")
[ -n "${DEMO_PRINT:-}" ] && sets+=("--set=exporters::otlp_grpc/windowprint::endpoint=$print")
[ -n "${DEMO_VIEW:-}" ] && sets+=("--set=extensions::window_aggregator_view::endpoint=$view")

printer="" collector="" gen=""
# stop ends the demo with status $1: 0 for Ctrl-C (how the demo is meant to end), else the failure's.
stop() {
  local rc=$1
  trap - INT TERM EXIT
  [ -n "$gen" ] && kill -TERM "$gen" 2>/dev/null && wait "$gen" 2>/dev/null || true
  # SIGTERM lets the collector fire its open windows before it exits; windowprint, stopped last,
  # prints them.
  [ -n "$collector" ] && kill -TERM "$collector" 2>/dev/null && wait "$collector" 2>/dev/null || true
  [ -n "$printer" ] && kill -TERM "$printer" 2>/dev/null && wait "$printer" 2>/dev/null || true
  exit "$rc"
}
trap 'stop 0' INT TERM
trap 'stop $?' EXIT

# await waits until host:port $1 accepts connections, as long as process $2 (named $3) runs.
await() {
  for _ in $(seq 1 100); do
    if (echo > "/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; then return 0; fi
    kill -0 "$2" 2>/dev/null || { echo "$3 did not start" >&2; exit 1; }
    sleep 0.1
  done
  echo "$3 is not listening on $1" >&2
  exit 1
}

"$windowprint" -listen "$print" &
printer=$!
await "$print" "$printer" windowprint
"$dist" --config "$config" ${sets[@]+"${sets[@]}"} &
collector=$!
await "$otlp" "$collector" "the collector"

# The collector judges its first batches against no watermark, so every record in them is on time,
# late or not: the load generator sends on-time records only for a warm-up, which sets the watermark
# from now, and mixes in the late ones after that. 15 s, so that the 20 s late records go into
# windows that windowprint has printed: into a window that had no records, a late one would be its
# first result, printed as the window's.
echo ">>> the operator's view: http://$view/ (W, its sources, the windows, records by outcome)" >&2
echo ">>> demo traffic: 3 services, on-time only for a 15 s warm-up, then 5% of records 20 s late (late firings), 2% 2 minutes late (routed); 2 pods a service export their metrics every second" >&2
echo ">>> below, as each 10-second window closes: its values by aggregation and series, then a line of the records that came late since the last one; press Ctrl-C to stop" >&2
"$loadgen" -quiet -endpoint "$otlp" -rate 100 -services 3 -series 2 -warm-up 15s -late 0.05 -late-by 20s -too-late 0.02 -too-late-by 2m -signals spans,logs,metrics -pods 2 -pod-restart 0.02 ${LOADGEN_FLAGS:-} &
gen=$!
rc=0
wait "$gen" || rc=$? # the load generator ends by itself only on an error
stop "$rc"
