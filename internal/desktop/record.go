package desktop

import (
	"context"
	"fmt"

	"genesis.dev/sandbox/internal/recording"
)

// RecordOptions asks for a recording of a desktop's display.
type RecordOptions = recording.Options

// Recording is the state of a desktop's display recording.
type Recording = recording.Recording

// StartRecording starts recording a desktop sandbox's display into trace
// segments (ffmpeg's x11grab inside the sandbox); one recording at a time
// per sandbox (409 recording_active).
func (m *Manager) StartRecording(ctx context.Context, tenant, id string, o RecordOptions) (*Recording, error) {
	t, err := m.cfg.Sandboxes.AttachDesktop(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	w, h, disp := t.Spec.Width, t.Spec.Height, t.Spec.Display
	src := recording.Source{Name: "display", Input: func(fps int) string {
		return fmt.Sprintf("-f x11grab -framerate %d -video_size %dx%d -i :%d", fps, w, h, disp)
	}}
	return m.recs.Start(ctx, &recording.Target{Tenant: t.Tenant, SandboxID: t.SandboxID,
		Launch: t.Launch, JobInfo: t.JobInfo, CancelJob: t.CancelJob, ReadFile: t.ReadFile, RemoveFile: t.RemoveFile, Release: t.Release}, src, o)
}

// StopRecording stops a sandbox's recording and waits (up to about 12 s)
// for its last segment to be kept.
func (m *Manager) StopRecording(ctx context.Context, tenant, id string) (*Recording, error) {
	sandboxID, err := m.desktopID(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return m.recs.Stop(ctx, sandboxID)
}

// GetRecording reports a sandbox's latest recording (404 code
// not_recording when it never had one).
func (m *Manager) GetRecording(ctx context.Context, tenant, id string) (*Recording, error) {
	sandboxID, err := m.desktopID(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return m.recs.Get(sandboxID)
}
