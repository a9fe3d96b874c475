#!/usr/bin/env bash
# Run every benchmark in turn; output to stdout.
# Usage: bench/run_all.sh [--quick | --issue13]
#   (no option)  the issue 1-7 set beside the bare Flask app, about 16 minutes
#   --quick      a smoke run of that set, about 1 minute
#   --issue13    issue 13's side-by-side set (WireMock, the floor, nginx), about 10 minutes;
#                needs bench/setup.sh. Set BEFORE_CLOSE=<req/s> to get the Connection: close
#                ratio against an earlier run.
# PYTHON (default: python) is the interpreter that has mockskill (and httptools) installed.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python}"
if [[ "${1:-}" == "--quick" ]]; then
  "$py" bench/startup.py --rounds 5
  "$py" bench/throughput.py --rounds 2 --duration 3
  "$py" bench/burst.py --rounds 1
  "$py" bench/burst_floor.py --rounds 1
  "$py" bench/delay_accuracy.py --rounds 1 --sequential 5 --skip-bare
  "$py" bench/hang_flood.py --rounds 1 --clients 1000
  "$py" bench/memory.py --total 20000 --unique-sessions
elif [[ "${1:-}" == "--issue13" ]]; then
  "$py" bench/keepalive.py --rounds 3 --duration 5 --cold 10 --warmup 120 \
    ${BEFORE_CLOSE:+--before-close "$BEFORE_CLOSE"}
  "$py" bench/burst_peers.py --clients 1000 10000 --rounds 2
  "$py" bench/hang_flood.py --clients 10000 --rounds 2 --requests 200
  "$py" bench/startup.py --rounds 15
  "$py" bench/memory.py --total 100000 --step 10000 --skip-bare
else
  "$py" bench/startup.py --rounds 15
  "$py" bench/throughput.py --rounds 5 --duration 5
  "$py" bench/burst.py --rounds 3
  "$py" bench/burst_floor.py --rounds 3
  "$py" bench/delay_accuracy.py --rounds 3 --sequential 20
  "$py" bench/hang_flood.py --rounds 3 --clients 1000
  "$py" bench/memory.py --total 100000 --step 10000 --unique-sessions
fi
