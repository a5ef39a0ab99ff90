#!/bin/sh
# Open MPI launch agent (--mca plm_rsh_agent) for `shoal testbed`: called as
# "agent HOST COMMAND..." like ssh, it runs COMMAND on HOST's namespace.
#   TESTBED_NAME  testbed name (default shoal)    TESTBED_SHOAL  the shoal binary (default: shoal on PATH)
# Example (mpirun itself runs on h0 so that the remote orteds can reach it):
#   TESTBED_SHOAL=$PWD/build/shoal shoal testbed exec h0 -- mpirun --allow-run-as-root --host shoal-h0:1,shoal-h1:1 \
#     -np 2 --mca plm_rsh_agent $PWD/bench/testbed-agent.sh --mca btl tcp,self --mca btl_tcp_if_include eth0 \
#     --mca oob_tcp_if_include eth0 hostname
host=$1; shift
exec "${TESTBED_SHOAL:-shoal}" testbed exec --name "${TESTBED_NAME:-shoal}" "$host" -- sh -c "$*"
