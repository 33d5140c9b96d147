#!/usr/bin/env python3
"""Reads `go test -json` and says where the time went.

    go test -json ./... | scripts/gotest-summary.py --stream [--top 20]
    scripts/gotest-summary.py [--top 20] [--package PKG] FILE.json

With --stream it echoes the run as plain `go test` does without -v (one
line per package, and the whole output of a test that failed or never
finished) while it reads, and exits 1 when a test or package failed, so
`make test` stays readable and keeps its verdict. Either way it ends with
the slowest packages, top-level tests and subtests (Elapsed of their
pass/fail event; a parallel test's time waiting for its turn is not
counted), and per package the sum of its top-level tests' elapsed beside
its wall time: their ratio is how many ran at once on average.

Standard library only: it runs with the Debian python3 that make setup
installs. Lines that are not JSON (build errors on stderr folded in, for
example) pass through unchanged.
"""

import argparse
import datetime
import json
import sys

FRAMING = ("=== RUN", "=== PAUSE", "=== CONT", "=== NAME")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", help="a go test -json file (default: stdin)")
    ap.add_argument("--stream", action="store_true", help="echo the run as plain go test does")
    ap.add_argument("--top", type=int, default=20, help="how many slowest to print (default 20)")
    ap.add_argument("--package", help="only this package (import path or its last element)")
    args = ap.parse_args()

    src = open(args.file, encoding="utf-8", errors="replace") if args.file else sys.stdin
    out = sys.stdout
    tests = []  # (elapsed, package, test, action)
    packages = {}  # package -> (elapsed, action)
    buffers = {}  # (package, test) -> [lines], in first-seen order
    failed_keys = set()
    paused = set()  # top-level tests that called t.Parallel
    first_cont = {}  # package -> time its parallel top-level tests started
    last_time = {}  # package -> time of its last event
    bad = False

    def take_test(pkg, top):
        # Removes the output of top and its subtests; returns that of top
        # and of its subtests that failed, in first-seen order.
        kept = []
        for key in list(buffers):
            p, name = key
            if p != pkg or not (name == top or name.startswith(top + "/")):
                continue
            lines = buffers.pop(key)
            if name == top or key in failed_keys:
                kept.extend(lines)
        return "".join(kept)

    for raw in src:
        try:
            ev = json.loads(raw)
        except ValueError:
            if args.stream:
                out.write(raw)
            continue
        if not isinstance(ev, dict):
            continue
        action = ev.get("Action", "")
        pkg = ev.get("Package") or ev.get("ImportPath") or ""
        if ev.get("Time"):
            last_time[pkg] = ev["Time"]
        test = ev.get("Test", "")
        text = ev.get("Output", "")

        if action == "build-output":
            if args.stream:
                out.write(text)
            continue
        if action == "build-fail":
            bad = True
            continue

        if test:
            key = (pkg, test)
            if "/" not in test and action in ("pause", "cont"):
                paused.add(key)
                if action == "cont":
                    first_cont.setdefault(pkg, ev.get("Time", ""))
            if action == "output":
                if not text.startswith(FRAMING):
                    buffers.setdefault(key, []).append(text)
                continue
            if action in ("pass", "fail", "skip"):
                tests.append((ev.get("Elapsed") or 0.0, pkg, test, action))
                if action == "fail":
                    failed_keys.add(key)
                    bad = True
                top = test.split("/", 1)[0]
                if "/" not in test:
                    lines = take_test(pkg, top)
                    if action == "fail" and args.stream:
                        out.write(lines)
                elif action != "fail":
                    buffers.pop(key, None)
            continue

        # Package-level events.
        if action == "output":
            if args.stream and text != "PASS\n":
                if text.startswith(("ok  ", "FAIL\t", "?   ")):
                    # Output of tests still running when the package ended
                    # (a timeout's panic names them): show it before the verdict.
                    for key in [k for k in buffers if k[0] == pkg]:
                        out.write("".join(buffers.pop(key)))
                out.write(text)
                out.flush()
            continue
        if action in ("pass", "fail", "skip"):
            packages[pkg] = (ev.get("Elapsed") or 0.0, action)
            if action == "fail":
                bad = True

    if args.package:
        want = args.package
        keep = lambda p: p == want or p.rsplit("/", 1)[-1] == want
        tests = [t for t in tests if keep(t[1])]
        packages = {p: v for p, v in packages.items() if keep(p)}

    report(out, tests, packages, args.top)
    phases(out, tests, packages, paused, first_cont, last_time)
    return 1 if (args.stream and bad) else 0


def short(pkg):
    return pkg.split("/", 1)[1] if "/" in pkg else pkg


def report(out, tests, packages, top):
    w = out.write
    w("\n== where the time went (go test -json; slowest first) ==\n")
    pk = sorted(packages.items(), key=lambda kv: -kv[1][0])
    busy = {}
    for el, pkg, test, _ in tests:
        if "/" not in test:
            busy[pkg] = busy.get(pkg, 0.0) + el
    w("packages (wall s; sum of top-level tests s; tests at once on average):\n")
    for pkg, (el, action) in pk[:min(top, 10)]:
        s = busy.get(pkg, 0.0)
        at_once = s / el if el else 0.0
        w("  %8.1f  %8.1f  %4.1f  %s%s\n" % (el, s, at_once, short(pkg), "" if action == "pass" else "  (" + action + ")"))
    tops = sorted((t for t in tests if "/" not in t[2]), key=lambda t: -t[0])
    subs = sorted((t for t in tests if "/" in t[2]), key=lambda t: -t[0])
    w("top-level tests (s):\n")
    for el, pkg, test, action in tops[:top]:
        w("  %8.1f  %s %s%s\n" % (el, short(pkg), test, "" if action == "pass" else "  (" + action + ")"))
    w("subtests (s):\n")
    for el, pkg, test, action in subs[:top]:
        w("  %8.1f  %s %s%s\n" % (el, short(pkg), test, "" if action == "pass" else "  (" + action + ")"))
    out.flush()


def seconds(stamp):
    # RFC 3339 with nanoseconds, as go test -json writes it; seconds of the day
    # are enough to subtract two stamps of one run (it may cross midnight).
    day, clock = stamp[:10], stamp[11:]
    hms = clock[:8]
    frac = ""
    rest = clock[8:]
    if rest.startswith("."):
        i = 1
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac = rest[1:i]
    base = datetime.datetime.strptime(day + " " + hms, "%Y-%m-%d %H:%M:%S").timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def phases(out, tests, packages, paused, first_cont, last_time):
    # The slowest package's two phases: go test runs the top-level tests
    # that do not call t.Parallel one at a time first, then the parallel ones
    # (at most -parallel at once, GOMAXPROCS by default).
    if not packages:
        return
    pkg = max(packages, key=lambda p: packages[p][0])
    serial = [t for t in tests if t[1] == pkg and "/" not in t[2] and (pkg, t[2]) not in paused]
    par = [t for t in tests if t[1] == pkg and "/" not in t[2] and (pkg, t[2]) in paused]
    if not serial or not par or pkg not in first_cont or pkg not in last_time:
        return
    wall = seconds(last_time[pkg]) - seconds(first_cont[pkg])
    busy = sum(t[0] for t in par)
    out.write("%s: %d serial top-level tests took %.1f s one after another; then %d parallel ones "
              "took %.1f s of wall time (%.1f s summed, %.1f at once on average)\n"
              % (short(pkg), len(serial), sum(t[0] for t in serial), len(par), wall, busy, busy / wall if wall else 0.0))
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
