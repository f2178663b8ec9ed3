#!/usr/bin/env bash
# Refits the gate's learned repeat judge to the tuning repeat files and writes
# common/src/gate/rules/rewording.json:
#
#   scripts/train-rewording.sh
#
# Needs the embedding model (scripts/fetch-model.sh) and python3 with scikit-learn
# (installed into a virtualenv under target/ on first use). Deterministic: the same tuning
# files give the same model.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/train-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "scikit-learn==1.9.1" "numpy==2.4.6"
fi
out=target/rewording-features.tsv
KARL_REWORDING_OUT="$PWD/$out" cargo test -q -p karl-common --test rewording_training -- \
  --ignored --nocapture
"$venv/bin/python" scripts/train_rewording.py "$out" >common/src/gate/rules/rewording.json.part
mv common/src/gate/rules/rewording.json.part common/src/gate/rules/rewording.json
echo "wrote common/src/gate/rules/rewording.json"
