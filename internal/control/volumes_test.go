package control_test

import (
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// TestVolumeRequestsRefusedEarly: a create asking for volumes where the
// service mounts none is 501 volumes_unsupported, and one from a saved
// state is 400 invalid_volume_mount; neither records a sandbox.
func TestVolumeRequestsRefusedEarly(t *testing.T) {
	t.Parallel()
	vols := []sandbox.VolumeRequest{{Volume: "v", Path: "/mnt/v"}}
	h := newHarnessWith(t, nil, func(c *control.Config) { c.Volumes = nil })
	ctx := t.Context()
	_, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile, Volumes: vols})
	if errdefs.Code(err) != control.CodeVolumesUnsupported || !errdefs.Is(err, errdefs.ErrNotImplemented) {
		t.Errorf("without volumes: %v", err)
	}
	_, err = h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile, Volumes: vols, From: &control.FromState{}})
	if errdefs.Code(err) != "invalid_volume_mount" || !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("from a saved state: %v", err)
	}
	if list, err := h.Svc.ListSandboxes(ctx, store.SandboxFilter{Tenant: "a"}); err != nil || len(list) != 0 {
		t.Errorf("refused creates left %d records (%v)", len(list), err)
	}
}
