package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLine is the longest line a backend may write to stdout.
const DefaultMaxLine = 4 << 20

// ErrProtocol is the class of a backend's protocol breach: a line that is
// not JSON, or longer than the cap.
var ErrProtocol = errors.New("protocol breach")

// Stdio is the backend side of a stdio MCP server: what it writes to stdout
// is checked line by line before the SDK reads it, and a breach kills it.
type Stdio struct {
	pr   *io.PipeReader
	in   io.WriteCloser
	kill func(reason string)

	mu      sync.Mutex
	breach  error
	observe func(line []byte) bool
}

// Connect implements sdk.Transport over the checked stdout and stdin.
func (s *Stdio) Connect(ctx context.Context) (sdk.Connection, error) {
	t := &sdk.IOTransport{Reader: s.pr, Writer: s.in, MaxLineLength: -1}
	return t.Connect(ctx)
}

// setObserver has fn see each line before the SDK does, in order; a line
// fn returns true for is consumed (the SDK never sees it). The proxy uses
// it to forward a call's progress before the call's answer.
func (s *Stdio) setObserver(fn func(line []byte) bool) {
	s.mu.Lock()
	s.observe = fn
	s.mu.Unlock()
}

func (s *Stdio) observer() func([]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.observe
}

// NewStdio checks stdout (the server's standard output) and writes to
// stdin. A line longer than maxLine (0: DefaultMaxLine) or one that is not
// a JSON value calls kill with the reason and ends the transport; blank
// lines are skipped. Close of the transport closes stdin and stops reading.
func NewStdio(stdout io.Reader, stdin io.WriteCloser, maxLine int, kill func(reason string)) *Stdio {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	pr, pw := io.Pipe()
	s := &Stdio{pr: pr, in: stdin, kill: kill}
	go s.pump(stdout, pw, maxLine)
	return s
}

func (s *Stdio) pump(stdout io.Reader, pw *io.PipeWriter, maxLine int) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine+1 {
			s.fail(pw, fmt.Errorf("the server wrote a line longer than %d bytes to stdout: %w", maxLine, ErrProtocol))
			return
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(bytes.TrimSpace(line)) > 0 && err == io.EOF {
				// a last line without newline: judge it like any other
				if !json.Valid(line) {
					s.fail(pw, nonJSON(line))
					return
				}
				line = append(line, '\n')
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			pw.CloseWithError(err)
			return
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 {
			if !json.Valid(trimmed) {
				s.fail(pw, nonJSON(trimmed))
				return
			}
			if fn := s.observer(); fn != nil && fn(trimmed) {
				line = line[:0]
				continue
			}
			if _, err := pw.Write(line); err != nil {
				return // the SDK closed its side
			}
		}
		line = line[:0]
	}
}

func nonJSON(line []byte) error {
	const show = 120
	if len(line) > show {
		line = append(line[:show:show], "…"...)
	}
	return fmt.Errorf("the server wrote a line to stdout that is not JSON (stdout is for protocol messages; log to stderr): %q: %w", line, ErrProtocol)
}

func (s *Stdio) fail(pw *io.PipeWriter, err error) {
	s.mu.Lock()
	s.breach = err
	s.mu.Unlock()
	if s.kill != nil {
		s.kill(err.Error())
	}
	pw.CloseWithError(err)
}

// Breach is the protocol breach that ended the backend, or nil.
func (s *Stdio) Breach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.breach
}
