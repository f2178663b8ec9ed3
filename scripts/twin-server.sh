#!/usr/bin/env bash
# Serves the test twin — SmolLM2-135M-Instruct on the CPU — as an OpenAI-compatible endpoint
# on loopback, for trying KARL with a real model without an MLX server:
#
#   scripts/fetch-model.sh            # once: the model and its runtime into ~/.cache/karl
#   scripts/twin-server.sh --port 8100
#   ./target/debug/karl-ctl demo --model-url http://127.0.0.1:8100/v1
#
# Options go to tests/twin/server.mjs (--port, --host, --context, --threads, --model FILE).
# A test and evaluation tool: the shipped binaries never start it.
set -euo pipefail
cd "$(dirname "$0")/.."
model="${KARL_TWIN_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/karl/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf}"
for a in "$@"; do
  [ "$a" = --model ] && exec node tests/twin/server.mjs "$@"
done
if [ ! -s "$model" ]; then
  echo "no twin model at $model: run scripts/fetch-model.sh (or set KARL_TWIN_MODEL)" >&2
  exit 2
fi
exec node tests/twin/server.mjs --model "$model" "$@"
