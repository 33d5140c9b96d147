// Package jobs runs work inside running sandboxes: synchronous execs,
// background jobs whose output a follower copies into a durable log
// (joblog) that survives client disconnects and service restarts, shell
// sessions whose cwd and exported environment persist between calls, and
// Python code contexts (pykernel.py). Jobs may ask for artifacts, which
// the artifacts.Keeper keeps when the job ends.
//
// It is also the kit of the capability packages above Attach, so that none
// rebuilds it: Wait (a job's final state, woken at its end: wait.go),
// helper jobs (the processes the service itself starts in a sandbox for a
// workload — a desktop's launched program, a recorder — recorded like any
// job, with a job_ id, a log and trace events: helpers.go) and
// Services.WaitReady / WaitListening (a port's readiness: a profile
// service's ready state, or a dial until it answers: ready.go).
//
// It reaches a sandbox only through control's Attach (a small interface it
// declares) and follows the sandboxes' lives through control's hooks: a
// sandbox that ends has its jobs canceled (SandboxEnding), and at start-up
// the jobs a previous process left are followed again or finished as lost
// (Recover).
//
// It may import control, store (for its record types), joblog, artifacts,
// agentclient, agentproto, config, sandbox and errdefs; it must not import
// httpapi, driver or the other workload packages.
package jobs
