#!/usr/bin/env bash
# Fetches the gate's embedding model from its registry package and unpacks it where KARL
# looks for it by default:
#
#   scripts/fetch-model.sh [DIR]
#
# DIR defaults to ${XDG_CACHE_HOME:-~/.cache}/karl/models/wordllama-l2-supercat-256. The
# model is WordLlama's l2_supercat table (256 dimensions, 32,000 tokens, MIT) as shipped in
# the PyPI package wordllama 0.4.0.post1; KARL reads its two files renamed to
# model.safetensors and tokenizer.json. Needs python3 with pip; nothing else is installed.
# Point karl-coord at another copy with `[gate] model = "DIR"` (deploy/karl-coord.toml).
set -euo pipefail

VERSION=0.4.0.post1
# The two files as published in that release; anything else is refused.
SHA256_WEIGHTS=64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5
SHA256_TOKENIZER=93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/karl/models/wordllama-l2-supercat-256}"

if [ -s "$dir/model.safetensors" ] && [ -s "$dir/tokenizer.json" ] \
   && grep -qx "wordllama $VERSION" "$dir/SOURCE" 2>/dev/null; then
  echo "model already in $dir"
  exit 0
fi

dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --python-version 3.11 --platform manylinux2014_x86_64 \
  "wordllama==$VERSION" -d "$dl"
wheel=$(ls "$dl"/wordllama-*.whl)
mkdir -p "$dir"
python3 - "$wheel" "$dir" "$SHA256_WEIGHTS" "$SHA256_TOKENIZER" <<'PY'
import hashlib, os, sys, zipfile
wheel, out, sha_w, sha_t = sys.argv[1:5]
want = [
    ("wordllama/weights/l2_supercat_256.safetensors", "model.safetensors", sha_w),
    ("wordllama/tokenizers/l2_supercat_tokenizer_config.json", "tokenizer.json", sha_t),
]
with zipfile.ZipFile(wheel) as z:
    for src, dst, sha in want:
        data = z.read(src)
        got = hashlib.sha256(data).hexdigest()
        if got != sha:
            sys.exit(f"{src}: sha256 {got}, expected {sha}; refusing it")
        tmp = os.path.join(out, dst + ".part")
        with open(tmp, "wb") as g:
            g.write(data)
        os.replace(tmp, os.path.join(out, dst))
    lic = next(n for n in z.namelist() if n.endswith("licenses/LICENSE"))
    with open(os.path.join(out, "LICENSE"), "wb") as g:
        g.write(z.read(lic))
with open(os.path.join(out, "config.json"), "w") as f:
    f.write('{"normalize": true}\n')
PY
echo "wordllama $VERSION" >"$dir/SOURCE"
echo "model unpacked into $dir"
