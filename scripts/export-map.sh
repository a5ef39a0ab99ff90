#!/usr/bin/env bash
# Linker version script exporting exactly the functions declared in the public
# headers (include/shoal/*.h): every other symbol of libshoal.so is local.
# usage: export-map.sh MAJOR header...
set -euo pipefail
major=$1; shift
# a declaration: an identifier shoal_xxx (one underscore: internal names are shoal__) followed by '('
names=$(sed -e 's|/\*.*\*/||g' -e 's|//.*||' "$@" | grep -v '^[[:space:]]*#' |
        grep -oE '\bshoal_[a-z0-9][a-z0-9_]*[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' | sort -u)
[ -n "$names" ] || { echo "export-map.sh: no public functions found in $*" >&2; exit 1; }
echo "SHOAL_$major {"
echo "  global:"
for n in $names; do echo "    $n;"; done
echo "  local: *;"
echo "};"
