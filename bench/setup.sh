#!/usr/bin/env bash
# Install what bench/ needs on a fresh Debian/Ubuntu machine (issue 13's side-by-side run,
# issue 27's bench/frozen.py):
#   wrk, hey, nginx + its echo module (echo_sleep), Java 17 if missing, the npm package
#   wiremock 3.13.x (its standalone jar, into a cache folder outside git), and
#   httptools (bench/floor_server.py) into the Python that runs the benches.
# Usage: bench/setup.sh [PYTHON]     (PYTHON defaults to .venv/bin/python, else python3)
# apt-get runs as root (through sudo when this script is not). nginx is installed but not
# started: the benches run their own nginx as a child with a nginx.conf in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-$( [[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3 )}"
CACHE="${MOCKSKILL_BENCH_CACHE:-$HOME/.cache/mockskill-bench}"

# hey: a second load generator, to cross-check a wrk figure by hand.
pkgs=(wrk hey nginx libnginx-mod-http-echo)
command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  as_root=()
  [[ $(id -u) == 0 ]] || as_root=(sudo)
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

mkdir -p "$CACHE/wiremock"
npm install --prefix "$CACHE/wiremock" --no-audit --no-fund wiremock@3.13 >/dev/null
ls "$CACHE"/wiremock/node_modules/wiremock/build/wiremock-standalone-*.jar

"$PY" -m pip install -q httptools
"$PY" -c 'import httptools; print("httptools", httptools.__version__)'
wrk --version 2>&1 | head -1 || true
command -v hey
nginx -v
java -version 2>&1 | head -1
