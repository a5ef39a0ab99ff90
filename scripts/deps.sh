#!/usr/bin/env bash
# Install the Debian packages shoal needs, or print the exact command when not root.
#   deps.sh test   what building and testing need
#   deps.sh bench  plus the anchors benchmarks run against (Open MPI, PyTorch/Gloo)
set -euo pipefail
what=${1:-test}
# pkg-config: the install test; python3-numpy/python3-torch: the Python binding's tests (Debian's /usr/bin/python3);
# libtorch-dev (with python3-dev) + pybind11-dev: the torch.distributed backend (shoal.torch, a C++ extension);
# slurm + munge: the live controller's test on the testbed (slurmdbd + mariadb-server: its accounting, testbed up
# --slurm --accounting; slurm-wlm-mysql-plugin: slurmdbd's storage plugin); libmicrohttpd, jansson, libcurl: the inference
# server, its router and load generator (HTTP server, JSON, HTTP client); universal-ctags: make check-code's
# function lengths (scripts/code-report.py); libmnl: the flow agent and controller (netlink)
pkgs=(build-essential libopenblas-dev libglpk-dev zlib1g-dev dataset-fashion-mnist iproute2 procps pkg-config
      python3-numpy python3-torch libtorch-dev pybind11-dev slurmctld slurmd slurm-client munge slurmdbd
      slurm-wlm-mysql-plugin mariadb-server libmicrohttpd-dev
      libjansson-dev libcurl4-openssl-dev universal-ctags libmnl-dev)
if [ "$what" = bench ]; then
  pkgs+=(openmpi-bin libopenmpi-dev gnuplot-nox linux-perf)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "shoal: missing Debian packages: ${missing[*]}" >&2
  echo "shoal: run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "shoal: installing missing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
