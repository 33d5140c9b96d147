"""A job's output read through the Python SDK, for make bench
(stream_client_test.go). Usage: stream_client.py SANDBOX_ID SCRIPT
MAX_OUTPUT_BYTES ENCODING, with GENESIS_URL and GENESIS_API_KEY set. Runs
SCRIPT with Sandbox.exec_stream and checks that stdout arrives from offset
0 without gap up to the exit event. Prints {"job_id", "stdout_bytes",
"events", "wall_s", "cpu_s"}: wall is request sent → exit event, cpu this
process's CPU time over the same span."""

import json
import sys
import time

from genesis_sandbox import Genesis, Sandbox


def main() -> None:
    sid, script, max_out, enc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    n = events = 0
    job_id = ""
    exit_ev = None
    with Genesis() as c:
        sb = Sandbox(c, {"id": sid})
        c0, t0 = time.process_time(), time.perf_counter()
        for ev in sb.exec_stream(script=script, max_output_bytes=max_out, timeout_ms=30 * 60 * 1000, encoding=enc):
            events += 1
            if ev.event == "job":
                job_id = str(ev.payload.get("id", ""))
            elif ev.event == "stdout":
                if ev.offset != n:
                    raise SystemExit(f"stdout event {ev.id} at offset {ev.offset}, want {n}")
                n += len(ev.data)
            elif ev.event == "exit":
                exit_ev = ev.payload
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if exit_ev is None or exit_ev.get("exit_code") != 0 or exit_ev.get("stdout_bytes") != n:
        raise SystemExit(f"job {job_id}: exit {exit_ev}, {n} bytes of stdout read")
    json.dump({"job_id": job_id, "stdout_bytes": n, "events": events, "wall_s": wall, "cpu_s": cpu}, sys.stdout)


if __name__ == "__main__":
    main()
