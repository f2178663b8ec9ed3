#!/usr/bin/env bash
# The dashboard's live feed: how long after a session commits a turn (its audit entry) an
# open page's event stream (/api/events) hears of it. Runs karl-coord with an in-process
# agent and the stand-in in a private tmux server, drives a 12-step plan-only session,
# and prints the delays (ms) from each intent/inject audit entry to the next event for
# that session on the feed. The page then re-reads one JSON document.
#
#   cargo build --workspace --bins && scripts/feed-latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${KARL_BIN:-target/debug}
dir=$(mktemp -d)
listen=127.0.0.1:${KARL_LAT_PORT:-17500}
http=127.0.0.1:$(( ${KARL_LAT_PORT:-17500} + 1 ))
socket="karl-lat-$$"
cleanup() {
  kill "${coord:-}" "${feed:-}" 2>/dev/null || true
  tmux -L "$socket" kill-server 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
printf '[engine]\nsettle_ms = 300\nmax_injections_per_minute = 600\n' > "$dir/karl-coord.toml"
"$bin/karl-coord" --config "$dir/karl-coord.toml" --listen "$listen" --http "$http" \
  --data-dir "$dir/data" --local-agent --machine mac2 --tmux-socket "$socket" \
  --local-pane "$bin/karl-standin --log $dir/standin.log" \
  --model-url http://127.0.0.1:9/v1 > "$dir/coord.log" 2>&1 &
coord=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://$http/api/fleet" && break; sleep 0.2; done
# Each line of the feed stamped with its arrival (ms since the epoch).
(curl -sN "http://$http/api/events" | while IFS= read -r line; do
  printf '%s %s\n' "$(date +%s%3N)" "$line"; done > "$dir/feed.log") &
feed=$!
sleep 1
for i in $(seq 1 12); do echo "Implement step $i of the parser: handle token kind $i."; done > "$dir/plan.txt"
ctl() { "$bin/karl-ctl" --coord "http://$listen" "$@"; }
id=$(ctl drive mac2 %0 --goal "Write the parser" --plan "$dir/plan.txt" --turns 12 --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 120); do
  ctl show "$id" --json | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["session"]["status"] != "done")' && break
  sleep 0.5
done
ctl audit --session "$id" --json --limit 200 > "$dir/audit.json"
python3 - "$dir/audit.json" "$dir/feed.log" "$id" <<'EOF'
import json, sys
audit, feed, sid = json.load(open(sys.argv[1])), open(sys.argv[2]), sys.argv[3]
arrivals = sorted(int(t) for t, _, rest in (l.partition(" ") for l in feed)
                  if rest.startswith("data:") and sid in rest)
lat = sorted(min(a for a in arrivals if a >= e["unix_ms"]) - e["unix_ms"]
             for e in audit if e["kind"] in ("intent", "inject")
             and any(a >= e["unix_ms"] for a in arrivals))
if not lat:
    sys.exit("no feed events matched the session's audit entries")
print(f"{len(lat)} commits: feed delay p50 {lat[len(lat)//2]} ms, max {lat[-1]} ms")
EOF
