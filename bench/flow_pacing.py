#!/usr/bin/python3
"""Pacing enforcement, measured (bench/flow-pacing.sh runs it on a testbed link).

recv ADDR PORT OUT          count received bytes in 20 ms bins (wall-clock stamps) into OUT
send ADDR PORT MODE SCHED   send for the schedule SCHED ("rateMB:seconds,..." rate 0 = no limit) with
                            MODE kernel (SO_MAX_PACING_RATE, TCP's own pacing) or bucket (a user-space
                            token bucket; TCP_NOTSENT_LOWAT keeps the socket's unsent queue at 128 KiB so
                            that a new rate takes effect at once); prints the phase start times and the
                            sender's CPU seconds
"""
import resource
import select
import socket
import struct
import sys
import time

SO_MAX_PACING_RATE = 47
TCP_NOTSENT_LOWAT = 25
UNLIMITED = (1 << 64) - 1


def recv(addr, port, out):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    c, _ = s.accept()
    bins = {}
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        k = int(time.time() / 0.02)
        bins[k] = bins.get(k, 0) + len(b)
    with open(out, 'w') as f:
        for k in sorted(bins):
            f.write('%.2f %d\n' % (k * 0.02, bins[k]))


def send(addr, port, mode, sched):
    phases = [(float(r) * 1e6, float(d)) for r, d in (p.split(':') for p in sched.split(','))]
    s = socket.create_connection((addr, port))
    s.setblocking(False)
    if mode == 'bucket':
        s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, 128 * 1024)
    buf = memoryview(b'x' * (1 << 20))
    t0 = time.time()
    print('start %.3f' % t0, flush=True)
    for rate, dur in phases:
        start = time.time()
        print('phase %.3f %.0f' % (start, rate), flush=True)
        if mode == 'kernel':
            s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, struct.pack('Q', int(rate) if rate > 0 else UNLIMITED))
        tokens, last = 16384.0, start
        while time.time() < start + dur:
            now = time.time()
            n = len(buf)
            if mode == 'bucket' and rate > 0:
                tokens = min(tokens + (now - last) * rate, max(16384.0, rate * 0.01))
                last = now
                if tokens < 1448:
                    time.sleep((1448 - tokens) / rate)
                    continue
                n = int(tokens)
            select.select([], [s], [], 0.005)
            try:
                k = s.send(buf[:n])
            except BlockingIOError:
                k = 0
            if mode == 'bucket' and rate > 0:
                tokens -= k
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print('cpu %.3f' % (ru.ru_utime + ru.ru_stime), flush=True)
    s.close()


if __name__ == '__main__':
    if sys.argv[1] == 'recv':
        recv(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
