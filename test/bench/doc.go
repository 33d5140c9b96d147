// Package bench holds the benchmarks behind `make bench`. They build
// sandbox-service and genesis-agent, start the service as a subprocess on a
// loopback port with its own data directory, and drive it through the public
// client package over real HTTP, under runc and runsc:
//
//   - BenchmarkColdCreate: POST /v1/sandboxes until the first exec's output
//     has arrived (also create-only and first-exec-only);
//   - BenchmarkExecRoundTrip: sequential exec of `true` on one running
//     sandbox, with `docker exec` on the same container as a reference;
//   - BenchmarkMemory: idle RSS of genesis-agent in a sandbox, and the
//     service's own RSS with no sandboxes and with idle ones alive.
//
// Each benchmark runs its own fixed number of iterations (run it with
// -benchtime 1x) and reports percentiles with b.ReportMetric plus a table in
// the log; nothing asserts a duration. Iteration counts come from the
// environment: GENESIS_BENCH_ITERS (cold creates per runtime, default 100),
// GENESIS_BENCH_EXEC_ITERS (execs per runtime, default 500),
// GENESIS_BENCH_DOCKER_EXEC_ITERS (docker exec reference, default 30) and
// GENESIS_BENCH_IDLE (idle sandboxes per runtime, default 10).
//
// The benchmarks skip when Docker does not answer (failing instead when
// CI=true), and remove every sandbox and stop every process they start.
// The non-test files hold the reporting helpers; they import only the
// standard library.
package bench
