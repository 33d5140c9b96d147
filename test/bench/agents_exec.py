"""Exec round trips of `true` through the Python SDK, for make bench
(agents_bench_test.go). Usage: agents_exec.py SANDBOX_ID N WARMUP, with
GENESIS_URL and GENESIS_API_KEY set. Prints {"us": [...]}: the N timed
round trips in microseconds, after WARMUP untimed ones."""

import json
import sys
import time

from genesis_sandbox import Genesis, Sandbox


def main() -> None:
    sid, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = []
    with Genesis() as c:
        sb = Sandbox(c, {"id": sid})
        for i in range(warm + n):
            t0 = time.perf_counter_ns()
            r = sb.exec(["true"])
            d = time.perf_counter_ns() - t0
            if r.exit_code != 0:
                raise SystemExit(f"true exited {r.exit_code} ({r.exit_reason})")
            if i >= warm:
                out.append(d // 1000)
    json.dump({"us": out}, sys.stdout)


if __name__ == "__main__":
    main()
