// Package probe keeps what this host can run now: the driver's capability
// probe (run at start, cached, run again every interval and, while a
// runtime is unhealthy, sooner with back-off; a runtime that passed before
// is kept through a few missed deadlines), whether workspace quotas are
// enforced, the configured profiles as seen on this host (their images,
// builds and usable runtimes) and the checks of readiness that follow
// from them.
//
// Control holds one Prober and forwards its capability calls to it. The
// package imports driver (the contract it probes), config, imagestate,
// imagebuild, diskquota (its method's name), sandbox and errdefs only;
// never control, the store, a workload or an API package.
package probe
