#!/usr/bin/env bash
# Run every benchmark in turn (about 16 minutes on 2 cores); output to stdout.
# Usage: bench/run_all.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--quick" ]]; then
  python bench/startup.py --rounds 5
  python bench/throughput.py --rounds 2 --duration 3
  python bench/burst.py --rounds 1
  python bench/burst_floor.py --rounds 1
  python bench/delay_accuracy.py --rounds 1 --sequential 5 --skip-bare
  python bench/hang_flood.py --rounds 1
  python bench/memory.py --total 20000 --unique-sessions
else
  python bench/startup.py --rounds 15
  python bench/throughput.py --rounds 5 --duration 5
  python bench/burst.py --rounds 3
  python bench/burst_floor.py --rounds 3
  python bench/delay_accuracy.py --rounds 3 --sequential 20
  python bench/hang_flood.py --rounds 3
  python bench/memory.py --total 100000 --step 10000 --unique-sessions
fi
