package httpapi

import (
	"net/http"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
)

// images answers GET /v1/images: the images of the configured profiles,
// in the order the service builds them, with the background builds'
// progress.
func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	views, err := s.ctl.Images(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.ImageList{Items: make([]api.Image, len(views))}
	for i, v := range views {
		out.Items[i] = apiwire.Image(v)
	}
	writeJSON(w, http.StatusOK, out)
}
