#!/usr/bin/env bash
# make demo: the whole system, briefly. Each part runs if its piece is built.
set -euo pipefail
build=${1:-build}
shoal="$build/shoal"
echo "== shoal $($shoal --version)"
$shoal config | head -5
