package kube

import (
	"context"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
)

// PurposeVolumeFiles is the purpose label of a volume files helper Pod.
const PurposeVolumeFiles = "volume-files"

// helperUID is the user of a helper's agent: the built-in images' sandbox
// user, who owns the files a sandbox leaves on a volume.
const helperUID = 1000

var _ driver.VolumeFiles = (*Driver)(nil)

// OpenVolumeFiles makes and starts helper holder's Pod: the agent image's
// agent as PID 1 on TCP, under runc, with the sandboxes' hardening (all
// capabilities dropped, no privilege escalation, read-only root, the
// sandbox user, no network but the agent's, no DNS, no service-account
// token), mounting volume id's claim at driver.VolumeFilesRoot, the
// agent's only allowed root. Its labels carry the purpose and no
// instance, so the reconciler leaves it to the volumes' sweep
// (VolumeFilesHelpers).
func (d *Driver) OpenVolumeFiles(ctx context.Context, holder, id string, readOnly bool) (_ driver.Dialer, err error) {
	name := podName(holder)
	spec := d.helperSpec(holder, id, readOnly)
	if _, err := d.CreateSandbox(ctx, spec); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if cerr := d.CloseVolumeFiles(cctx, holder); cerr != nil {
				d.log.Warn("kube: removing a volume files helper after a failed start", "pod", name, "err", cerr)
			}
		}
	}()
	if err := d.Start(ctx, name); err != nil {
		return nil, err
	}
	return d.AgentDialer(holder), nil
}

// CloseVolumeFiles stops helper holder's Pod (a second's grace) and
// removes it once its container has ended, so that the volume's next
// writer never overlaps it.
func (d *Driver) CloseVolumeFiles(ctx context.Context, holder string) error {
	return d.RemoveSandbox(ctx, holder, "")
}

// VolumeFilesHelpers lists the holders of the helper Pods that exist.
func (d *Driver) VolumeFilesHelpers(ctx context.Context) ([]string, error) {
	l, err := d.pods().List(ctx, metav1.ListOptions{LabelSelector: driver.LabelManaged + "=true," + driver.LabelPurpose + "=" + PurposeVolumeFiles})
	if err != nil {
		return nil, apiErr("list volume files helpers", err)
	}
	out := make([]string, 0, len(l.Items))
	for i := range l.Items {
		st := status(&l.Items[i])
		if h := st.Labels[driver.LabelSandbox]; h != "" {
			out = append(out, h)
		}
	}
	return out, nil
}

// helperSpec is helper holder's sandbox: its container is the agent image
// itself (CreateSandbox adds the agent, installed by the init container,
// its token's SHA-256 only, and fsGroup), whose one file root is volume
// id's claim.
func (d *Driver) helperSpec(holder, id string, readOnly bool) driver.SandboxSpec {
	return driver.SandboxSpec{ID: holder, UID: helperUID, GID: helperUID, DiskMB: 16, Container: driver.Spec{
		Image: d.cfg.AgentImage, Runtime: sandbox.RuntimeRunc,
		Labels:    map[string]string{driver.LabelPurpose: PurposeVolumeFiles, driver.LabelSandbox: holder, labelVolume: id},
		Env:       []string{agentproto.FileRootsEnv + "=" + driver.VolumeFilesRoot},
		User:      strconv.Itoa(helperUID) + ":" + strconv.Itoa(helperUID),
		WorkDir:   driver.VolumeFilesRoot,
		Resources: sandbox.Resources{CPU: 0.25, MemoryMB: 128},
		ReadOnly:  true,
		Mounts:    []driver.Mount{{Volume: id, Target: driver.VolumeFilesRoot, ReadOnly: readOnly}},
		Tmpfs:     map[string]string{"/tmp": "size=16m"},
	}}
}
