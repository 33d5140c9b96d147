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
	serveGet(s, http.StatusOK, func(r *http.Request) (api.ImageList, error) {
		return wired(apiwire.Images)(s.ctl.Images(r.Context()))
	})(w, r)
}
