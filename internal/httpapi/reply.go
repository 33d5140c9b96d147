package httpapi

import "net/http"

// A handler decodes, calls and encodes. These build the usual shapes from
// the call alone, so a route's file holds what differs: which call, which
// conversion, which headers.

// serveGet serves a route without a body: f's answer as JSON with status,
// or f's error as a problem.
func serveGet[W any](s *Server, status int, f func(*http.Request) (W, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := f(r)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		writeJSON(w, status, out)
	}
}

// serveBody serves a route whose body is a JSON Req (decoded strictly):
// f's answer as JSON with status, or a problem.
func serveBody[Req, W any](s *Server, status int, f func(*http.Request, *Req) (W, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := s.decode(w, r, &req); err != nil {
			s.writeProblem(w, r, err)
			return
		}
		out, err := f(r, &req)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		writeJSON(w, status, out)
	}
}

// serveNoContent serves a route that answers 204 once f succeeds.
func serveNoContent(s *Server, f func(*http.Request) error) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(r); err != nil {
			s.writeProblem(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// wired converts a call's answer to its wire form with conv, unless the
// call failed: wired(apiwire.Job)(s.jobs.GetJob(…)).
func wired[T, W any](conv func(T) W) func(T, error) (W, error) {
	return func(v T, err error) (W, error) {
		if err != nil {
			var zero W
			return zero, err
		}
		return conv(v), nil
	}
}

// serveHeaded is serveGet for a route whose answer carries headers (ETag,
// Location): f sets them in h once its call succeeded.
func serveHeaded[W any](s *Server, status int, f func(h http.Header, r *http.Request) (W, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		serveGet(s, status, func(r *http.Request) (W, error) { return f(w.Header(), r) })(w, r)
	}
}

// serveBodyHeaded is serveBody for a route whose answer carries headers:
// f sets them in h once its call succeeded.
func serveBodyHeaded[Req, W any](s *Server, status int, f func(h http.Header, r *http.Request, req *Req) (W, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		serveBody(s, status, func(r *http.Request, req *Req) (W, error) { return f(w.Header(), r, req) })(w, r)
	}
}

// serveOptionalBody is serveBody for a route whose body may be left out
// (every field at its default).
func serveOptionalBody[Req, W any](s *Server, status int, f func(*http.Request, *Req) (W, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			serveBody(s, status, f)(w, r)
			return
		}
		serveGet(s, status, func(r *http.Request) (W, error) { return f(r, new(Req)) })(w, r)
	}
}
