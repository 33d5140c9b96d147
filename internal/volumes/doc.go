// Package volumes owns named volumes: a tenant's directories with a hard
// size limit that outlive the sandboxes they are mounted into. Each volume
// is a loop-mounted ext4 image below the service's data dir
// (<data>/volumes/<id>/{volume.img,data}, made and mounted by diskquota,
// the mechanism of workspace quotas), so writing past its size fails with
// ENOSPC inside a sandbox and on the host alike. Records live in the store
// (store.Volumes); the sandboxes that hold a volume are kept in its record
// under the row lock, which enforces one writer or any number of readers
// across every instance sharing the store.
//
// The package answers the volume API (create, list, get, delete), the
// files of a volume no sandbox needs for (list, upload, download, delete;
// every path opened through an os.Root on the volume, so neither "..", an
// absolute path nor a symlink leaves it), and, for control through the
// interface control declares, the holds of a sandbox (Acquire at create,
// Release when its container is gone; its Sweep hook releases the holds of
// sandboxes that ended without it).
//
// Where sandboxes run on other hosts a sandboxer may keep the volumes'
// data itself (driver.VolumeProvisioner, Config.Provisioner: driver/kube
// makes a PersistentVolumeClaim per volume); the records, limits and holds
// stay here, a mount names the volume (driver.Mount.Volume), and the files
// API goes through the sandboxer's files helpers (driver.VolumeFiles,
// remotefiles.go: a helper per call, held like a sandbox), or answers 501
// volume_files_unsupported where it has none.
//
// A create checks the tenant's volume limits (its quotas max_volumes and
// max_volume_mb, under the service's ceiling) and stores the record under
// the tenant's quota lock, so concurrent creates cannot pass them.
//
// It imports the store's contract, diskquota, driver (a mount's shape),
// sandbox, tenant (a tenant's quotas), errdefs and agentclient (a files
// helper's agent); never control, a workload package, the API or a
// driver implementation.
package volumes
