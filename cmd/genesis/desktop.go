package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newDesktopCmd builds "genesis desktop" and its subcommands.
func newDesktopCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "desktop",
		Short: "Operate the display of a desktop sandbox: computer-use actions and screenshots",
		Long: `A sandbox of a desktop profile (such as desktop-vnc) runs an X display.
Run computer-use actions on it (genesis desktop actions) in the Anthropic
computer tool's or OpenAI's vocabulary, or take a screenshot.`,
	}
	cmd.AddCommand(newDesktopActionsCmd(a), newDesktopScreenshotCmd(a), newDesktopControlCmd(a), newDesktopViewCmd(a), newDesktopRecordCmd(a))
	return cmd
}

// newDesktopActionsCmd builds "genesis desktop actions SANDBOX [FILE|-]".
func newDesktopActionsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "actions SANDBOX [FILE|-]",
		Short: "Run computer-use actions from a JSON file or stdin",
		Long: `Reads {"actions":[...], "display":{...}, "screenshot":true} or a bare JSON
array of actions from FILE, or from stdin without FILE or for "-", and runs
them in order on the sandbox's display, for example:

  [{"action":"launch","command":["xterm"]},
   {"action":"wait_for_window","title":"xterm"},
   {"action":"left_click","coordinate":[640,400]},
   {"action":"type","text":"hello"},
   {"action":"key","text":"Return"}]

Prints one line per action run: index, action, ok, milliseconds, then what
the step answered — a launched program's job id, the cursor, a screenshot's
size, the number of windows (each window on a line of its own: id, title,
class, position, size, active) — and a failed step's code and error. With --json the
whole answer, screenshots included as base64 PNG. The actions stop at the
first that fails; then the exit status is 1.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("want a sandbox id and optionally FILE or -, got %d argument(s)", len(args))
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			name := "-"
			if len(args) == 2 {
				name = args[1]
			}
			var (
				b   []byte
				err error
			)
			if name == "-" {
				b, err = io.ReadAll(a.stdin)
			} else {
				b, err = os.ReadFile(name)
			}
			if err != nil {
				return usageErrorf("reading the actions: %v", err)
			}
			b = bytes.TrimSpace(b)
			var req client.ComputerActionsRequest
			if len(b) > 0 && b[0] == '[' {
				err = decodeStrict(b, &req.Actions)
			} else {
				err = decodeStrict(b, &req)
			}
			if err != nil {
				return usageErrorf("the actions are not {\"actions\":[...]} or a JSON array of actions: %v", err)
			}
			if len(req.Actions) == 0 {
				return usageErrorf("no actions to run")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			res, err := c.ComputerActions(ctx, args[0], req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := printJSON(a.stdout, res); err != nil {
					return err
				}
			} else {
				for _, r := range res.Results {
					if _, err := fmt.Fprint(a.stdout, actionLines(r)); err != nil {
						return err
					}
				}
			}
			if !res.OK {
				return fmt.Errorf("%d of %d actions completed", res.Completed, len(req.Actions))
			}
			return nil
		}),
	}
}

// actionLines is one step of an actions answer as text: a line of tab
// separated fields (index, action, ok, milliseconds, what the step
// answered, a failure's code and error), then a line per window.
func actionLines(r client.ComputerStepResult) string {
	f := []string{strconv.Itoa(r.Index), r.Action, strconv.FormatBool(r.OK), fmt.Sprintf("%dms", r.DurationMS)}
	if r.JobID != "" {
		f = append(f, "job "+r.JobID)
	}
	if r.Cursor != nil {
		f = append(f, fmt.Sprintf("cursor %d,%d", r.Cursor.X, r.Cursor.Y))
	}
	if r.Screenshot != "" {
		f = append(f, fmt.Sprintf("screenshot %d bytes PNG (--json has it)", base64.StdEncoding.DecodedLen(len(r.Screenshot))))
	}
	switch n := len(r.Windows); {
	case n == 1:
		f = append(f, "1 window")
	case n > 1:
		f = append(f, fmt.Sprintf("%d windows", n))
	case r.OK && (r.Action == "list_windows" || r.Action == "wait_for_window"):
		f = append(f, "no windows")
	}
	if r.Error != "" {
		f = append(f, cmp.Or(r.Code, "error")+": "+r.Error)
	}
	var b strings.Builder
	b.WriteString(strings.Join(f, "\t") + "\n")
	for _, w := range r.Windows {
		fmt.Fprintf(&b, "\twindow %s %q", w.ID, w.Title)
		if w.Class != "" {
			b.WriteString(" class " + w.Class)
		}
		fmt.Fprintf(&b, " at %d,%d %dx%d", w.X, w.Y, w.Width, w.Height)
		if w.Active {
			b.WriteString(" active")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// newDesktopScreenshotCmd builds "genesis desktop screenshot SANDBOX".
func newDesktopScreenshotCmd(a *app) *cobra.Command {
	var (
		dest          string
		width, height int
	)
	cmd := &cobra.Command{
		Use:   "screenshot SANDBOX [-O FILE] [--width W --height H]",
		Short: "Save a PNG screenshot of a desktop sandbox's display",
		Long: `Writes the display as a PNG to FILE (default screenshot.png), scaled to
--width x --height when given (the logical display size an agent works in).`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if dest == "" {
				return usageErrorf("--output-file must not be empty")
			}
			req := client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "screenshot"}}}
			if width != 0 || height != 0 {
				req.Display = &client.DisplaySize{Width: width, Height: height}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			res, err := c.ComputerActions(ctx, args[0], req)
			if err != nil {
				return err
			}
			if !res.OK {
				return fmt.Errorf("screenshot: %s", res.Results[0].Error)
			}
			png, err := base64.StdEncoding.DecodeString(res.Results[0].Screenshot)
			if err != nil {
				return fmt.Errorf("the screenshot is not base64: %w", err)
			}
			if err := writeFileAtomic(dest, 0o644, func(w io.Writer) error { _, err := w.Write(png); return err }); err != nil {
				return err
			}
			a.warnf("wrote %s (%d bytes, %dx%d)", dest, len(png), res.Display.Width, res.Display.Height)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&dest, "output-file", "O", "screenshot.png", "where to write the PNG")
	cmd.Flags().IntVar(&width, "width", 0, "logical display width to scale to")
	cmd.Flags().IntVar(&height, "height", 0, "logical display height to scale to")
	return cmd
}

// newDesktopControlCmd builds "genesis desktop control SANDBOX [take HOLDER|release|request REASON|wait]".
func newDesktopControlCmd(a *app) *cobra.Command {
	var (
		reason      string
		screenshots bool
	)
	cmd := &cobra.Command{
		Use:   "control SANDBOX [take HOLDER | release | request REASON | wait]",
		Short: "Show or change who controls a desktop sandbox (agent or human:<who>)",
		Long: `Without a verb, prints the control lease: holder, reason, since, requests.
"take human:alice --reason R" takes control for a person at once (the agent's
actions then answer 409 control_held; --allow-screenshots lets it look);
"take agent" takes it for the agent; "release" gives it back; "request R"
asks for a human; "wait" waits (up to 60 s) for the next change.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 3 {
				return usageErrorf("want a sandbox id and optionally a verb, got %d argument(s)", len(args))
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			verb := ""
			if len(args) > 1 {
				verb = args[1]
			}
			need := map[string]int{"": 1, "take": 3, "release": 2, "request": 3, "wait": 2}
			if n, ok := need[verb]; !ok || n != len(args) {
				return usageErrorf("want: control SANDBOX [take HOLDER | release | request REASON | wait]")
			}
			var st *client.DesktopControl
			switch verb {
			case "":
				st, err = c.DesktopControl(ctx, args[0], -1, 0)
			case "take":
				st, err = c.TakeDesktopControl(ctx, args[0], client.TakeDesktopControlRequest{Holder: args[2], Reason: reason, AllowScreenshots: screenshots})
			case "release":
				st, err = c.ReleaseDesktopControl(ctx, args[0])
			case "request":
				st, err = c.RequestHuman(ctx, args[0], args[2])
			case "wait":
				if st, err = c.DesktopControl(ctx, args[0], -1, 0); err == nil {
					st, err = c.DesktopControl(ctx, args[0], st.Version, 60*time.Second)
				}
			}
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, st)
			}
			holder := st.Holder
			if holder == "" {
				holder = "(nobody)"
			}
			fields := []field{
				{"Holder", holder}, {"Reason", st.Reason}, {"Since", formatTime(st.Since)},
				{"Screenshots", strconv.FormatBool(st.AllowScreenshots)}, {"Version", strconv.FormatInt(st.Version, 10)},
			}
			for _, r := range st.Requests {
				fields = append(fields, field{"Request", formatTime(r.At) + " " + r.Reason})
			}
			return printFields(a.stdout, fields)
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why control is taken")
	cmd.Flags().BoolVar(&screenshots, "allow-screenshots", false, "let the agent take screenshots while a human holds control")
	return cmd
}

// newDesktopViewCmd builds "genesis desktop view SANDBOX [--role R] [--ttl D]".
func newDesktopViewCmd(a *app) *cobra.Command {
	var (
		role string
		ttl  time.Duration
		ws   bool
	)
	cmd := &cobra.Command{
		Use:   "view SANDBOX [--role observer|controller] [--ttl 10m] [--ws]",
		Short: "Print a short-lived live-view link (a page to open in a browser; no API key in it)",
		Long: `Prints the live-view page of a new link for the role: open it in a browser
to watch (observer) or take over (controller) the desktop; add ?who=NAME to
name yourself. With --ws, prints the link's WebSocket URL instead, for a VNC
client that speaks RFB over WebSockets. Neither holds the API key. An
observer's input is dropped by the service; a controller takes the pen from
any other controller, and their first input takes control from the agent.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.DisplayLink, error) {
				return c.CreateDisplayLink(ctx, args[0], role, ttl)
			}, func(l *client.DisplayLink) error {
				u := l.ViewerURL
				if ws {
					u = l.VNCURL
				}
				_, err := fmt.Fprintln(a.stdout, u)
				a.warnf("%s link, expires %s", l.Role, l.ExpiresAt.Format(time.RFC3339))
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&role, "role", "observer", "observer or controller")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "how long the link works")
	cmd.Flags().BoolVar(&ws, "ws", false, "print the RFB WebSocket URL, not the page")
	return cmd
}

// newDesktopRecordCmd builds "genesis desktop record SANDBOX start|stop|status".
func newDesktopRecordCmd(a *app) *cobra.Command {
	return newRecordCmd(a, "display", "records the display with ffmpeg inside the sandbox",
		(*client.Client).StartRecording, (*client.Client).StopRecording, (*client.Client).GetRecording)
}

// newRecordCmd builds "record SANDBOX start|stop|status" of what (the
// desktop's display, the browser's active tab).
func newRecordCmd(a *app, what, how string,
	start func(*client.Client, context.Context, string, client.RecordingRequest) (*client.Recording, error),
	stop, status func(*client.Client, context.Context, string) (*client.Recording, error)) *cobra.Command {
	var fps, segment int
	cmd := &cobra.Command{
		Use:   "record SANDBOX start|stop|status [--fps 5] [--segment 2]",
		Short: "Record the " + what + " into the sandbox's trace (video segments as artifacts)",
		Long: `start ` + how + `: every closed
segment becomes an artifact and a video.segment event of the trace (genesis
trace export carries them, and its player plays them in step with the events).
stop ends it and waits for the last segment; status shows it.`,
		Args: exactArgs(2, "a sandbox id and start, stop or status"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Recording, error) {
				switch args[1] {
				case "start":
					return start(c, ctx, args[0], client.RecordingRequest{FPS: fps, SegmentSeconds: segment})
				case "stop":
					return stop(c, ctx, args[0])
				case "status":
					return status(c, ctx, args[0])
				}
				return nil, usageErrorf("want start, stop or status, got %q", args[1])
			}, func(r *client.Recording) error {
				return printFields(a.stdout, []field{
					{"Recording", r.ID}, {"State", r.State}, {"FPS", strconv.Itoa(r.FPS)},
					{"Segments", strconv.Itoa(r.Segments)}, {"Bytes", strconv.FormatInt(r.Bytes, 10)}, {"Error", r.Error},
				})
			})
		}),
	}
	cmd.Flags().IntVar(&fps, "fps", 0, "frames per second (default 5)")
	cmd.Flags().IntVar(&segment, "segment", 0, "seconds per segment (default 2)")
	return cmd
}
