package httpapi

import (
	"net/http"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/imagebuild"
)

// imageStatus is the wire status of an image: present, queued, building
// (waiting for another build included), failed or not_built.
func imageStatus(present bool, b *imagebuild.Progress) string {
	switch {
	case present:
		return "present"
	case b == nil:
		return "not_built"
	case b.State == imagebuild.StateQueued:
		return "queued"
	case b.State == imagebuild.StateWaiting || b.State == imagebuild.StateBuilding:
		return "building"
	case b.State == imagebuild.StateFailed:
		return "failed"
	default:
		return "not_built"
	}
}

func imageBuildWire(b *imagebuild.Progress) *client.ImageBuild {
	if b == nil {
		return nil
	}
	timeOrNil := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	return &client.ImageBuild{
		State: string(b.State), Step: b.Step, StepNumber: b.StepNumber, Steps: b.Steps,
		Done: b.Done, Total: b.Total, Unit: b.Unit, Percent: b.Percent, Summary: b.Summary(), Detail: b.Detail,
		StartedAt: timeOrNil(b.StartedAt), UpdatedAt: timeOrNil(b.UpdatedAt), FinishedAt: timeOrNil(b.FinishedAt),
		Error: b.Error,
	}
}

func imageWire(v control.ImageView) client.Image {
	im := client.Image{Name: v.Name, Ref: v.Ref, Profiles: v.Profiles, Status: imageStatus(v.Present, v.Build), Build: imageBuildWire(v.Build)}
	if im.Profiles == nil {
		im.Profiles = []string{}
	}
	if !v.Present {
		im.BuildCommand = v.BuildCommand
	}
	return im
}

// images answers GET /v1/images: the images of the configured profiles,
// in the order the service builds them, with the background builds'
// progress.
func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	views, err := s.ctl.Images(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := client.ImageList{Items: make([]client.Image, len(views))}
	for i, v := range views {
		out.Items[i] = imageWire(v)
	}
	writeJSON(w, http.StatusOK, out)
}
