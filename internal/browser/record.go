package browser

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/recording"
)

// Jobs runs the recorder in a browser sandbox as a recorded job, so it
// has a job id that GET /v1/jobs/{id} answers and a log (jobs.Manager's
// helper jobs).
type Jobs interface {
	StartHelper(ctx context.Context, tenant, sandboxID string, req agentproto.JobStartRequest) (agentproto.JobInfo, error)
	HelperInfo(ctx context.Context, tenant, jobID string) (agentproto.JobInfo, error)
	CancelHelper(ctx context.Context, tenant, jobID string, grace time.Duration) error
	OpenHelperStdin(ctx context.Context, tenant, jobID string) (io.WriteCloser, error)
}

// screencastQuality is the JPEG quality of the screencast's frames.
const screencastQuality = 70

// StartRecording records a browser sandbox's active tab into trace
// segments: Chromium's screencast sends the tab's frames to the service,
// which streams the latest one into ffmpeg inside the sandbox at the
// recording's frame rate (ffmpeg stamps them with the wall clock). The
// recording follows the active tab. One recording at a time per sandbox
// (409 recording_active).
func (m *Manager) StartRecording(ctx context.Context, tenant, id string, o recording.Options) (*recording.Recording, error) {
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	release := t.Release
	if !m.liveSession(t.SandboxID) {
		if err := m.waitReady(ctx, t); err != nil {
			release()
			return nil, err
		}
	}
	s, err := m.session(ctx, t)
	if err != nil {
		release()
		return nil, err
	}
	s.mu.Lock()
	if _, ok := s.tabs[s.active]; !ok {
		if _, err := s.newTab(ctx, ""); err != nil {
			s.mu.Unlock()
			release()
			return nil, err
		}
	}
	s.mu.Unlock()
	files, jobs, tenant, sandboxID := t.Files, t.Jobs, t.Tenant, t.SandboxID
	rt := &recording.Target{Tenant: tenant, SandboxID: sandboxID,
		Launch: func(ctx context.Context, req agentproto.JobStartRequest) (agentproto.JobInfo, error) {
			return jobs.StartHelper(ctx, tenant, sandboxID, req)
		},
		JobInfo: func(ctx context.Context, id string) (agentproto.JobInfo, error) {
			return jobs.HelperInfo(ctx, tenant, id)
		},
		CancelJob: func(ctx context.Context, id string, grace time.Duration) error {
			return jobs.CancelHelper(ctx, tenant, id, grace)
		},
		OpenStdin: func(ctx context.Context, id string) (io.WriteCloser, error) {
			return jobs.OpenHelperStdin(ctx, tenant, id)
		},
		ReadFile: func(ctx context.Context, path string) (io.ReadCloser, error) {
			r, err := files.ReadFile(ctx, http.MethodGet, path, nil)
			if err != nil {
				return nil, err
			}
			return r.Body, nil
		},
		RemoveFile: func(ctx context.Context, path string, recursive bool) error {
			return files.DeleteFile(ctx, agentproto.DeleteRequest{Path: path, Recursive: recursive})
		},
		Release: release}
	src := recording.Source{Name: "browser",
		Input: func(int) string {
			// Frames are stamped as they arrive; x264 wants even sides.
			return "-use_wallclock_as_timestamps 1 -f mjpeg -i pipe:0 -vf 'scale=trunc(iw/2)*2:trunc(ih/2)*2'"
		},
		Feed: s.screencast}
	return m.recs.Start(ctx, rt, src, o)
}

// StopRecording stops a sandbox's recording and waits (up to about 12 s)
// for its last segment to be kept.
func (m *Manager) StopRecording(ctx context.Context, tenant, id string) (*recording.Recording, error) {
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	t.Release()
	return m.recs.Stop(ctx, t.SandboxID)
}

// GetRecording reports a sandbox's latest recording (404 code
// not_recording when it never had one).
func (m *Manager) GetRecording(ctx context.Context, tenant, id string) (*recording.Recording, error) {
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	t.Release()
	return m.recs.Get(t.SandboxID)
}

// screencast writes the active tab's latest screencast frame (a JPEG) to
// w fps times a second until ctx ends; when the active tab changes it
// follows it. Before the first frame it writes nothing.
func (s *session) screencast(ctx context.Context, w io.Writer, fps int) error {
	var (
		mu     sync.Mutex
		latest []byte
		cur    context.Context
		stop   = func() {}
	)
	follow := func(tc *tabCtx) error {
		stop()
		lctx, cancel := context.WithCancel(tc.ctx)
		acks := make(chan int64, 8)
		if err := chromedp.Listen(lctx, func(ev any) {
			if f, ok := ev.(*page.EventScreencastFrame); ok {
				mu.Lock()
				latest = f.Data
				mu.Unlock()
				select {
				case acks <- f.SessionID:
				default:
				}
			}
		}); err != nil {
			cancel()
			return err
		}
		go func() { // acknowledged off the tab's reading goroutine
			for {
				select {
				case <-lctx.Done():
					return
				case id := <-acks:
					_, _ = chromedp.Call(lctx, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: id})
				}
			}
		}()
		q := int64(screencastQuality)
		sctx, scancel := context.WithTimeout(lctx, 5*time.Second)
		_, err := chromedp.Call(sctx, page.StartScreencast, page.StartScreencastParams{Format: page.StartScreencastFormatJpeg, Quality: &q})
		scancel()
		if err != nil {
			cancel()
			return fmt.Errorf("starting the screencast: %w", err)
		}
		stop = func() {
			sctx, scancel := context.WithTimeout(tc.ctx, 2*time.Second)
			_, _ = chromedp.Call(sctx, page.StopScreencast, cdp.Empty{})
			scancel()
			cancel()
		}
		cur = tc.ctx
		return nil
	}
	defer func() { stop() }()
	tick := time.NewTicker(time.Second / time.Duration(fps))
	defer tick.Stop()
	for {
		if tc := s.watched.Load(); tc != nil && tc.ctx != cur && tc.ctx.Err() == nil {
			if err := follow(tc); err != nil {
				return err
			}
		}
		mu.Lock()
		f := latest
		mu.Unlock()
		if f != nil {
			if _, err := w.Write(f); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
