#!/usr/bin/env bash
# `make install` into a staging root (DESTDIR + PREFIX), then build a user's
# program with `pkg-config --cflags --libs shoal` against that copy, shared and
# static, and run it on 2 ranks with the installed `shoal launch`. Also checks
# the soname chain and that libshoal.so exports only the public API.
# usage: test-install.sh BUILD_DIR [TIMEOUT_S [name patterns...]]
#   prints "install: N passed, M failed, K skipped"; runs only if no pattern is given or one is part of "install"
set -uo pipefail
build=$1; shift; [ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then
  want=0; for pat in "$@"; do case install in *"$pat"*) want=1;; esac; done
  [ $want = 1 ] || { echo "install: 0 passed, 0 failed, 0 skipped"; exit 0; }
fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
if [ -n "${SHOAL_SANITIZE:-}" ]; then
  # the sanitizer build's library needs the ASan runtime preloaded into every user program: not an install
  echo "skip install (sanitizer pass: the installed library is checked in the plain pass)"
  echo "install: 0 passed, 0 failed, 1 skipped"; exit 0
fi
pass=0; fail=0
ok() { echo "ok install_$1"; pass=$((pass+1)); }
bad() { echo "FAIL install_$1: $2"; fail=$((fail+1)); }
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
prefix=/opt/shoal-test
ver=$(sed -n 's/^#define SHOAL_VERSION_STRING "\(.*\)"/\1/p' include/shoal/shoal.h); major=${ver%%.*}

if out=$(make --no-print-directory BUILD="$build" DESTDIR="$stage" PREFIX="$prefix" install 2>&1); then ok make_install
else bad make_install "$out"; echo "install: $pass passed, $((fail)) failed, 0 skipped"; exit 1; fi

root=$stage$prefix
files_ok=1
pydir=$(make --no-print-directory -s PREFIX="$prefix" pythondir)
for f in bin/shoal lib/libshoal.so.$ver lib/libshoal.a lib/pkgconfig/shoal.pc include/shoal/shoal.h \
         include/shoal/request.h "${pydir#$prefix/}/shoal/__init__.py"; do
  [ -e "$root/$f" ] || { bad files "missing $f"; files_ok=0; }
done
[ "$(readlink "$root/lib/libshoal.so.$major")" = "libshoal.so.$ver" ] || { bad files "libshoal.so.$major -> $(readlink "$root/lib/libshoal.so.$major")"; files_ok=0; }
[ "$(readlink "$root/lib/libshoal.so")" = "libshoal.so.$major" ] || { bad files "libshoal.so -> $(readlink "$root/lib/libshoal.so")"; files_ok=0; }
soname=$(readelf -d "$root/lib/libshoal.so.$ver" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libshoal.so.$major" ] || { bad files "soname '$soname'"; files_ok=0; }
[ $files_ok = 1 ] && ok files_and_soname

# exported: exactly functions declared in the installed headers (plus the version node)
exported=$(nm -D --defined-only "$root/lib/libshoal.so.$ver" | awk '{sub(/@.*/, "", $3)} $3 != "SHOAL_'"$major"'" {print $3}' | sort)
declared=$(sed -e 's|/\*.*\*/||g' "$root"/include/shoal/*.h | grep -oE '\bshoal_[a-z0-9][a-z0-9_]*[[:space:]]*\(' |
           sed -E 's/[[:space:]]*\($//' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
if [ -n "$extra" ]; then bad exports "not in the public headers: $(echo $extra | head -c 400)"
elif ! grep -qx shoal_iallreduce <<<"$exported" || ! grep -qx shoal_comm_init_env <<<"$exported"; then
  bad exports "public functions missing from the dynamic symbol table"
else ok exports_public_api_only; fi

export PKG_CONFIG_PATH=$root/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
if pc=$(pkg-config --cflags --libs shoal 2>&1) && [ "$(pkg-config --modversion shoal)" = "$ver" ]; then ok pkg_config
else bad pkg_config "$pc"; fi
cc=${CC:-cc}
tmp=$stage/work; mkdir -p "$tmp"
# shared: compile exactly as a user would
if out=$($cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags shoal) -o "$tmp/hello" tests/install/hello.c \
         $(pkg-config --libs shoal) 2>&1) && readelf -d "$tmp/hello" | grep -q "NEEDED.*libshoal.so.$major"; then
  ok build_shared
else bad build_shared "$out"; fi
# static: the archive plus Libs.private
static_libs=$(pkg-config --static --libs shoal | sed 's/-lshoal\b/-l:libshoal.a/')
if out=$($cc -std=c11 -Wall -Werror $(pkg-config --cflags shoal) -o "$tmp/hello_static" tests/install/hello.c \
         $static_libs 2>&1) && ! readelf -d "$tmp/hello_static" | grep -q libshoal; then ok build_static
else bad build_static "$out"; fi
# C++ can include the headers
if command -v c++ >/dev/null; then
  if out=$(echo '#include <shoal/shoal.h>
int main() { return shoal_dtype_size(SHOAL_FLOAT32) == 4 ? 0 : 1; }' |
           c++ -x c++ -Wall -Werror $(pkg-config --cflags shoal) -o "$tmp/hello_cxx" - $(pkg-config --libs shoal) 2>&1); then
    ok cxx_headers
  else bad cxx_headers "$out"; fi
fi
# run on 2 ranks with the installed CLI, the program finding the installed library
for kind in hello hello_static; do
  [ -x "$tmp/$kind" ] || continue
  if out=$(LD_LIBRARY_PATH=$root/lib SHOAL_MASTER_PORT=0 timeout 60 "$root/bin/shoal" launch -n 2 -- "$tmp/$kind" 2>&1) &&
     [ "$(grep -c ': ok$' <<<"$out")" = 2 ]; then ok "run_$kind"
  else bad "run_$kind" "$out"; fi
done
if [ -x "$tmp/hello" ] && ldd_out=$(LD_LIBRARY_PATH=$root/lib ldd "$tmp/hello") && grep -q "$root/lib/libshoal.so.$major" <<<"$ldd_out"; then
  ok resolves_installed_library
else bad resolves_installed_library "${ldd_out:-}"; fi
# the Python package: where Debian's interpreter looks for PREFIX=/usr/local and /usr; the staged copy
# imports and loads the installed library (found relative to the package)
py=/usr/bin/python3
if [ -x $py ]; then
  syspath=$($py -c 'import sys; print("\n".join(sys.path))')
  miss=""
  for p in /usr/local /usr; do
    d=$(make --no-print-directory -s PREFIX=$p pythondir)
    grep -qx "$d" <<<"$syspath" || miss="$miss $d"
  done
  if [ -z "$miss" ]; then ok python_dir_on_sys_path; else bad python_dir_on_sys_path "not on $py's sys.path:$miss"; fi
  if out=$(cd "$tmp" && env -u SHOAL_LIBRARY PYTHONPATH="$stage$pydir" $py -c 'import shoal._lib as l; print(l.path)' 2>&1) &&
     [ "$out" = "$root/lib/libshoal.so.$major" ]; then ok python_import_installed
  else bad python_import_installed "$out"; fi
  # the torch backend, where it was built: installed beside the package, loaded from there
  if [ -f "$build/_c10d.so" ]; then
    if out=$(cd "$tmp" && env -u SHOAL_LIBRARY PYTHONPATH="$stage$pydir" $py -c \
               'import sys, shoal.torch; print(sys.modules["shoal._c10d"].__file__)' 2>&1) &&
       [ "$out" = "$stage$pydir/shoal/_c10d.so" ]; then ok torch_backend_installed
    else bad torch_backend_installed "$out"; fi
  fi
fi
# the package installed away from PREFIX/lib (PYTHONDIR given) finds the library in the recorded LIBDIR;
# a multiarch LIBDIR leaves the package under PREFIX/lib
p2=$stage/p2
if [ -x $py ]; then
  if out=$(make --no-print-directory BUILD="$build" PREFIX="$p2" PYTHONDIR="$p2/site" install 2>&1) &&
     out=$(cd "$tmp" && env -u SHOAL_LIBRARY PYTHONPATH="$p2/site" $py -c 'import shoal._lib as l; print(l.path)' 2>&1) &&
     [ "$out" = "$p2/lib/libshoal.so.$major" ]; then ok python_dir_given_finds_libdir
  else bad python_dir_given_finds_libdir "$out"; fi
fi
d=$(make --no-print-directory -s PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu pythondir)
if [ "$d" = /usr/lib/python3/dist-packages ]; then ok python_dir_ignores_multiarch_libdir
else bad python_dir_ignores_multiarch_libdir "PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu: $d"; fi
# uninstall removes exactly what install wrote: another version's library stays
touch "$root/lib/libshoal.so.9.0.0"; ln -sf libshoal.so.9.0.0 "$root/lib/libshoal.so.9"
if out=$(make --no-print-directory BUILD="$build" DESTDIR="$stage" PREFIX="$prefix" uninstall 2>&1); then
  left=$(cd "$root" && find . -mindepth 1 \( -type f -o -type l \) | sort | tr '\n' ' ')
  if [ "$left" = "./lib/libshoal.so.9 ./lib/libshoal.so.9.0.0 " ]; then ok uninstall_exactly
  else bad uninstall_exactly "left after uninstall: $left"; fi
else bad uninstall_exactly "$out"; fi
echo "install: $pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
