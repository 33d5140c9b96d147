// Package probe keeps what this host can run now: the driver's capability
// probe (run at start, cached, run again every interval and, while a
// runtime is unhealthy, sooner with back-off; a runtime that passed before
// is kept through a few missed deadlines), the configured profiles as seen
// on this host (their images, builds and usable runtimes) and the checks of
// readiness that follow from both.
//
// Control holds one Prober and forwards its capability calls to it. The
// package imports driver (the contract it probes), config, imagestate,
// imagebuild and sandbox only; never control, the store, a workload or an
// API package.
package probe
