package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/client"
)

// shellMessage is a text (control) message of the terminal WebSocket; see
// GET /v1/sandboxes/{id}/terminal in api/openapi.yaml.
type shellMessage = api.TerminalMessage

// newShellCmd builds "genesis shell".
func newShellCmd(a *app) *cobra.Command {
	var (
		terminal string
		takeover bool
	)
	cmd := &cobra.Command{
		Use:   "shell [flags] SANDBOX",
		Short: "Open an interactive terminal in a sandbox",
		Long: `Open an interactive terminal in a sandbox: the sandbox user's shell on a
pseudo-terminal, with this terminal in raw mode and window size changes
forwarded. genesis exits with the remote process's exit status.

The terminal keeps running when the connection drops; reconnect with
--terminal ID (the recent screen is replayed). Only one connection writes to
a terminal: others watch read-only unless they use --takeover.`,
		Args: exactArgs(1, "SANDBOX"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.shell(cmd.Context(), args[0], terminal, takeover)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&terminal, "terminal", "", "reconnect to this terminal instead of starting a new shell")
	f.BoolVar(&takeover, "takeover", false, "become the terminal's writer even if another connection is")
	return cmd
}

// endpoint returns the service URL and API key from the flags or the
// environment, as client() does.
func (a *app) endpoint() (string, string, error) {
	base := a.url
	if base == "" {
		base = a.getenv(client.EnvURL)
	}
	if base == "" {
		base = client.DefaultURL
	}
	if err := client.ValidateBaseURL(base); err != nil {
		return "", "", &usageError{err: err}
	}
	key := a.apiKey
	if key == "" {
		key = a.getenv(client.EnvAPIKey)
	}
	return strings.TrimRight(base, "/"), key, nil
}

// shell runs one terminal session.
func (a *app) shell(ctx context.Context, sandboxID, terminal string, takeover bool) error {
	base, key, err := a.endpoint()
	if err != nil {
		return err
	}
	in, _ := a.stdin.(*os.File)
	tty := in != nil && isTerminal(in)
	q := url.Values{}
	if terminal != "" {
		q.Set("terminal", terminal)
	}
	if takeover {
		q.Set("takeover", "1")
	}
	if tty {
		if cols, rows, ok := terminalSize(in); ok {
			q.Set("cols", strconv.Itoa(cols))
			q.Set("rows", strconv.Itoa(rows))
		}
	}
	u := base + "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/terminal"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	h := http.Header{}
	h.Set("User-Agent", "genesis-cli/"+buildVersion().Version)
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	dctx, cancel := a.callContext(ctx)
	ws, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPHeader: h, HTTPClient: a.http, CompressionMode: websocket.CompressionDisabled})
	cancel()
	if err != nil {
		if ae := handshakeError(resp); ae != nil {
			return ae
		}
		return fmt.Errorf("connecting to %s: %w", u, err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)

	nl := "\n"
	if tty {
		restore, err := makeRaw(in)
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer restore()
		nl = "\r\n" // raw mode: no output post-processing
	}
	s := &shellSession{a: a, ws: ws, nl: nl, reconnect: terminal != ""}
	return s.run(ctx, tty, in)
}

// handshakeError turns a refused upgrade into an API error.
func handshakeError(resp *http.Response) error {
	if resp == nil || resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode < 300 {
		return nil
	}
	ae := &client.APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-ID")}
	if resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &ae.Problem) != nil {
			ae.Problem.Detail = strings.TrimSpace(string(b))
		}
	}
	if ae.RequestID == "" {
		ae.RequestID = ae.Problem.RequestID
	}
	return ae
}

// shellSession pumps one terminal WebSocket.
type shellSession struct {
	a         *app
	ws        *websocket.Conn
	nl        string // line end for notes on stderr
	reconnect bool   // --terminal was given
	terminal  string
}

func (s *shellSession) note(format string, args ...any) {
	fmt.Fprintf(s.a.stderr, "genesis: "+format+s.nl, args...)
}

func (s *shellSession) control(ctx context.Context, m shellMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.ws.Write(ctx, websocket.MessageText, b)
}

func (s *shellSession) run(ctx context.Context, tty bool, in *os.File) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Local input → terminal. The read may stay blocked when the session
	// ends; the process is about to exit then.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := s.a.stdin.Read(buf)
			if n > 0 {
				if s.ws.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				return // end of input: keep showing output until the exit
			}
		}
	}()
	if tty {
		winch := make(chan os.Signal, 1)
		notifyResize(winch) // no such signal on Windows: the size is sent once
		defer signal.Stop(winch)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-winch:
				}
				if cols, rows, ok := terminalSize(in); ok {
					if s.control(ctx, shellMessage{Type: "resize", Cols: cols, Rows: rows}) != nil {
						return
					}
				}
			}
		}()
	}

	for {
		typ, data, err := s.ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return &exitError{code: 130}
			}
			how := err.Error()
			if st := websocket.CloseStatus(err); st != -1 {
				how = fmt.Sprintf("closed by the service (%d)", st)
			}
			if s.terminal != "" {
				return fmt.Errorf("connection to terminal %s lost: %s; the terminal may still run: reconnect with --terminal %s", s.terminal, how, s.terminal)
			}
			return fmt.Errorf("terminal connection lost: %s", how)
		}
		if typ == websocket.MessageBinary {
			if _, err := s.a.stdout.Write(data); err != nil {
				return err
			}
			continue
		}
		var m shellMessage
		if err := json.Unmarshal(data, &m); err != nil {
			continue
		}
		switch m.Type {
		case "hello":
			s.terminal = m.Terminal
			if !s.reconnect {
				s.note("terminal %s (reconnect or watch with --terminal %s)", m.Terminal, m.Terminal)
			}
			if m.Writer != nil && !*m.Writer {
				s.note("terminal %s: watching read-only, another connection is writing (use --takeover)", m.Terminal)
			}
		case "writer":
			// On a line of its own: the cursor may be anywhere.
			fmt.Fprint(s.a.stderr, s.nl)
			if m.Writer != nil && *m.Writer {
				s.note("you are now the writer")
			} else {
				s.note("another connection took over: watching read-only; your input is ignored")
			}
		case "exit":
			s.ws.Close(websocket.StatusNormalClosure, "")
			code := 0
			if m.Code != nil {
				code = *m.Code
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		}
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// terminalSize returns the window size of the terminal f.
func terminalSize(f *os.File) (cols, rows int, ok bool) {
	cols, rows, err := term.GetSize(int(f.Fd()))
	return cols, rows, err == nil && cols > 0 && rows > 0
}

// makeRaw puts the terminal f in raw mode and returns the function that
// restores its previous mode.
func makeRaw(f *os.File) (func(), error) {
	old, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	return func() { _ = term.Restore(int(f.Fd()), old) }, nil
}
