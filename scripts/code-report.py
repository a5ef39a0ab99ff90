#!/usr/bin/env python3
"""Report the code's shape: functions over a length limit, and call circles between files.

  scripts/code-report.py [--check] [--limit N] [--max-long N] [--folders a,b]

Function lengths come from universal-ctags (start and end line of every C function in src/ and
tools/). A function longer than --limit lines (100) must say why in the comment directly above it,
in a line containing "Long function:"; at most --max-long (8) such functions are allowed.

Call circles: every .c file of a folder is compiled with gcc -fcallgraph-info (the direct calls the
compiler sees; calls through function pointers, such as an algorithm table, are not edges, which is
the point of a table). File A calls file B when a function defined in A calls one defined in B. A
circle is a strongly connected set of more than one file. Reported for src/<layer> (every layer,
its sub-folders together) and for tools/.

--check exits 1 when a limit is broken: a long function without a reason, more long functions than
allowed, or a call circle of more than one file in a folder of --folders (default src/comm,
tools). Without --check it only reports.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "Long function:"


def c_files(folder):
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, folder)):
        out += [os.path.join(d, f) for f in files if f.endswith(".c")]
    return sorted(out)


def functions(files):
    """(name, file, start, end) of every function definition, from ctags."""
    if not files:
        return []
    try:
        r = subprocess.run(["ctags", "-x", "--_xformat=%{name}|%{input}|%{line}|%{end}", "--kinds-C=f",
                            "--fields=+ne", "--language-force=C"] + files,
                           capture_output=True, text=True, check=True)
    except FileNotFoundError:
        sys.exit("code-report: ctags not found: install Debian's universal-ctags (apt-get install universal-ctags)")
    out = []
    for line in r.stdout.splitlines():
        name, path, start, end = line.rsplit("|", 3)
        if end.isdigit():
            out.append((name, path, int(start), int(end)))
    return out


def reason_above(lines, start):
    """The "Long function:" reason in the comment block directly above line START (1-based), or None."""
    i = start - 2
    # the signature may span lines above the name's line only through a return type line; skip none
    block = []
    while i >= 0:
        s = lines[i].strip()
        if s.startswith(("/*", "*", "//")) or s.endswith("*/"):
            block.append(s)
            i -= 1
            continue
        break
    text = " ".join(reversed(block))
    m = re.search(re.escape(MARK) + r"\s*(.*?)(\*/|$)", text)
    if m and m.group(1).strip():
        return m.group(1).strip()
    return None


def long_functions(limit):
    files = c_files("src") + c_files("tools")
    res = []
    cache = {}
    for name, path, start, end in functions(files):
        n = end - start + 1
        if n <= limit:
            continue
        if path not in cache:
            with open(path, encoding="utf-8", errors="replace") as f:
                cache[path] = f.read().split("\n")
        res.append((n, os.path.relpath(path, ROOT), start, name, reason_above(cache[path], start)))
    res.sort(reverse=True)
    return res


NODE = re.compile(r'^node: \{ title: "([^"]*)" label: "([^"\\]*)\\n([^"]*):(\d+):(\d+)"(.*)\}')
EDGE = re.compile(r'^edge: \{ sourcename: "([^"]*)" targetname: "([^"]*)"')


def file_graph(folder):
    """{file: set(files it calls)} for the .c files under FOLDER."""
    files = c_files(folder)
    defined = {}      # node title -> defining .c file, for functions defined in this folder
    edges = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(files):
            obj = os.path.join(tmp, "%d.o" % i)
            cmd = ["gcc", "-std=c11", "-D_GNU_SOURCE", "-I" + os.path.join(ROOT, "include"),
                   "-I" + os.path.join(ROOT, "src"), "-I" + os.path.join(ROOT, "tools"), "-pthread",
                   "-fcallgraph-info", "-c", path, "-o", obj]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)  # .incbin paths are from the root
            if r.returncode != 0:
                sys.exit("code-report: cannot compile %s:\n%s" % (path, r.stderr))
            ci = os.path.join(tmp, "%d.ci" % i)
            with open(ci) as f:
                for line in f:
                    m = NODE.match(line)
                    if m:
                        title, _, where, _, _, rest = m.groups()
                        # a node without "shape : ellipse" is defined in this translation unit
                        if "ellipse" not in rest and os.path.realpath(where) == os.path.realpath(path):
                            key = title if ":" not in title else title  # static: "file:name", global: name
                            defined[key] = path
                        continue
                    m = EDGE.match(line)
                    if m:
                        edges.append((path, m.group(1), m.group(2)))
    graph = collections.defaultdict(set)
    for path, src, dst in edges:
        a = defined.get(src, path)
        b = defined.get(dst)
        if b and b != a:
            graph[a].add(b)
    for f in files:
        graph.setdefault(f, set())
    return graph


def circles(graph):
    """Strongly connected components with more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(os.path.relpath(c, ROOT) for c in comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a limit is broken")
    ap.add_argument("--limit", type=int, default=100, help="lines a function may have without a reason (100)")
    ap.add_argument("--max-long", type=int, default=8, help="functions allowed over the limit with a reason (8)")
    ap.add_argument("--folders", default="src/comm,tools",
                    help="folders where a call circle of more than one file fails --check")
    a = ap.parse_args()
    bad = []

    longs = long_functions(a.limit)
    with_reason = [x for x in longs if x[4]]
    print("functions over %d lines: %d (%d with a reason above them, at most %d allowed; %d without)"
          % (a.limit, len(longs), len(with_reason), a.max_long, len(longs) - len(with_reason)))
    for n, path, start, name, why in longs:
        print("  %4d  %s:%d  %s%s" % (n, path, start, name, "" if why else "   <- no reason"))
    if len(longs) > len(with_reason):
        bad.append("%d function(s) over %d lines without a '%s' reason" % (len(longs) - len(with_reason), a.limit, MARK))
    if len(with_reason) > a.max_long:
        bad.append("%d functions over %d lines, at most %d allowed" % (len(with_reason), a.limit, a.max_long))

    strict = [f.strip() for f in a.folders.split(",") if f.strip()]
    folders = sorted("src/" + d for d in os.listdir(os.path.join(ROOT, "src"))
                     if os.path.isdir(os.path.join(ROOT, "src", d)))
    folders.append("tools")
    for sub in strict:
        if sub not in folders and os.path.isdir(os.path.join(ROOT, sub)):
            folders.append(sub)
    print("call circles (files that call each other, directly or around a circle):")
    for folder in folders:
        cs = circles(file_graph(folder))
        if not cs:
            print("  %-14s none" % folder)
        for c in cs:
            print("  %-14s %d files: %s" % (folder, len(c), " ".join(c)))
            if folder in strict:
                bad.append("call circle of %d files in %s" % (len(c), folder))
    if a.check and bad:
        for b in bad:
            print("code-report: " + b, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
