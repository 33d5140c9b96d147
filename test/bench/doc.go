// Package bench holds the benchmarks behind `make bench`. They build
// sandbox-service and genesis-agent, start the service as a subprocess on a
// loopback port with its own data directory, and drive it through the public
// client package over real HTTP (the streaming ones through their own SSE
// reader), under runc and runsc:
//
//   - BenchmarkColdCreate: POST /v1/sandboxes until the first exec's output
//     has arrived (also create-only and first-exec-only), interleaved with
//     `docker run --rm --network none` of the same image, with their ratio
//     and the service's per-step create timeline;
//   - BenchmarkExecRoundTrip: sequential exec of `true` on one running
//     sandbox, with `docker exec` on the same container as a reference;
//   - BenchmarkMemory: idle RSS of genesis-agent in a sandbox, and the
//     service's own RSS with no sandboxes and with idle ones alive;
//   - BenchmarkStreamThroughput: MiB/s of a job's output decoded by an SSE
//     client, through POST exec with Accept: text/event-stream, through
//     GET /v1/jobs/{id}/logs?follow=true after a background start, and
//     replayed from the finished log, with the CPU time of the client, the
//     service and the sandbox's cgroup;
//   - BenchmarkStreamClient: MiB/s of a job's stdout as a user of the public
//     client package receives it (ExecStream live, StreamLogs replayed),
//     base64 and text alternating over several rounds, with the CPU seconds
//     per GiB of the service, the client and the sandbox; and the same
//     through the Python SDK's exec_stream (stream_client.py) when
//     /usr/bin/python3 has httpx;
//   - BenchmarkStreamTTFB: POST exec of `echo hi` with Accept:
//     text/event-stream until its stdout event, on one warm sandbox;
//   - BenchmarkStreamResume: GET /v1/jobs/{id}/logs of a finished job with
//     Last-Event-ID in the middle of its log until the first event;
//   - BenchmarkConsoleFirstView: the web console's sandbox list with 100
//     sandboxes, reloaded in Chromium until it is rendered;
//   - BenchmarkSpeed (`make bench-speed`): the headline figures of exec,
//     warm lease and cold create, each beside this build's baseline (a
//     second service of another build, GENESIS_BENCH_BASELINE_BIN), the
//     agent alone, `docker exec` and `docker run`, interleaved call by call;
//   - BenchmarkLoad (`make bench-load`): 200 sandboxes on one host, execs of
//     `true` at concurrency 32, with the service's CPU and RSS;
//   - BenchmarkTargets (`make bench-targets`, only with
//     GENESIS_BENCH_TARGETS=1): the parts of the benchmarks above and of
//     the browser, MCP and desktop ones that measure issue 40's figures,
//     in one run against the baseline build, then one summary table of
//     every figure with its comparisons, its target's verdict and the
//     load average (targets.go renders it; GENESIS_BENCH_TARGETS_OUT
//     names its file, GENESIS_BENCH_TARGETS_LOAD=0 leaves the load step
//     out).
//
// docs/performance.md describes the last three and their knobs.
//
// Each benchmark runs its own fixed number of iterations (run it with
// -benchtime 1x) and reports percentiles with b.ReportMetric plus a table in
// the log; nothing asserts a duration. Iteration counts come from the
// environment: GENESIS_BENCH_ITERS (cold creates per runtime, default 100),
// GENESIS_BENCH_EXEC_ITERS (execs per runtime, default 500),
// GENESIS_BENCH_DOCKER_EXEC_ITERS (docker exec reference, default 30),
// GENESIS_BENCH_IDLE (idle sandboxes per runtime, default 10),
// GENESIS_BENCH_STREAM_MIB (output of the throughput job, default 512),
// GENESIS_BENCH_CLIENT_STREAM_MIB (of the client job, default 256),
// GENESIS_BENCH_STREAM_RUNS (rounds of BenchmarkStreamClient, default 5;
// rounded up to an even count with a baseline),
// GENESIS_BENCH_TTFB_ITERS (default 300) and GENESIS_BENCH_RESUME_ITERS
// (default 200).
//
// The benchmarks skip when Docker does not answer (failing instead when
// CI=true), and remove every sandbox and stop every process they start.
// The non-test files hold the reporting helpers and the SSE reader; they
// import only the standard library.
package bench
