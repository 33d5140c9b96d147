package httpapi

import (
	"net/http"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/desktop"
)

// Desktop routes of a desktop profile's sandbox:
//
//	POST /v1/sandboxes/{id}/computer/actions   run computer-use actions (screenshot, click, type, key, ...)
func (s *Server) desktopRoutes() {
	if s.desktop == nil {
		return
	}
	s.handle("POST", "/v1/sandboxes/{id}/computer/actions", true, s.computerActions)
}

func (s *Server) computerActions(w http.ResponseWriter, r *http.Request) {
	var req client.ComputerActionsRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := desktop.ActionsRequest{Screenshot: req.Screenshot, Actions: make([]desktop.Action, len(req.Actions))}
	if req.Display != nil {
		in.Display = &desktop.Size{Width: req.Display.Width, Height: req.Display.Height}
	}
	for i, a := range req.Actions {
		da := desktop.Action{Action: a.Action, Coordinate: a.Coordinate, X: a.X, Y: a.Y, StartCoordinate: a.StartCoordinate,
			Button: a.Button, Text: a.Text, Keys: a.Keys, ScrollDirection: a.ScrollDirection, ScrollAmount: a.ScrollAmount,
			ScrollX: a.ScrollX, ScrollY: a.ScrollY, Duration: a.Duration, Region: a.Region, Window: a.Window,
			Command: a.Command, Env: a.Env}
		for _, p := range a.Path {
			da.Path = append(da.Path, desktop.Point{X: p.X, Y: p.Y})
		}
		in.Actions[i] = da
	}
	res, err := s.desktop.Run(r.Context(), tenantOf(r), r.PathValue("id"), &in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := client.ComputerActionsResult{Completed: res.Completed, OK: res.OK, Screenshot: res.Screenshot,
		Display: client.DisplaySize(res.Display), Real: client.DisplaySize(res.Real),
		Results: make([]client.ComputerStepResult, len(res.Results))}
	for i, sr := range res.Results {
		cr := client.ComputerStepResult{Index: sr.Index, Action: sr.Action, OK: sr.OK, Error: sr.Error, Code: sr.Code,
			Screenshot: sr.Screenshot, JobID: sr.JobID, DurationMS: sr.DurationMS}
		if sr.Cursor != nil {
			cr.Cursor = &client.ComputerPoint{X: sr.Cursor.X, Y: sr.Cursor.Y}
		}
		for _, w := range sr.Windows {
			cr.Windows = append(cr.Windows, client.ComputerWindow(w))
		}
		out.Results[i] = cr
	}
	writeJSON(w, http.StatusOK, out)
}
