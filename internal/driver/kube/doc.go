// Package kube is the Kubernetes driver: a sandbox is a Pod.
//
// A container is a Pod of one container, created held back by a
// scheduling gate (Create) and let go by removing it (Start); a finalizer
// keeps a stopped Pod readable until Remove. Its runtime is the Pod's
// RuntimeClass (gVisor's for runsc), never a silent default. Labels the
// cluster cannot carry as label values (times, free text) round-trip
// through an annotation; a few are also real labels so that List selects
// by them.
//
// As a driver.Sandboxer it delivers the agent without an image of its own
// in a registry: an init container of the agent image (the service's own)
// copies the agent binary into an emptyDir the sandbox container runs it
// from as PID 1, listening on TCP on the Pod's address. Every connection
// opens with a token derived from a key the replicas share and the Pod's
// name, so one sandbox cannot drive another's agent. The workspace is an
// emptyDir, capped when the sandbox has a disk quota.
//
// As a driver.VolumeProvisioner it keeps named volumes as
// PersistentVolumeClaims of the configured or the cluster's default
// StorageClass; a mount of one (driver.Mount.Volume) is the Pod's claim
// volume, and a Pod that mounts claims is stopped and seen ended before it
// is removed. Host bind mounts are refused: a Pod has no path on the
// service's host.
//
// Like every driver package it knows neither records nor tenants.
package kube
