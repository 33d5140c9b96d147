package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newBrowserCmd builds "genesis browser" and its subcommands.
func newBrowserCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "browser",
		Short: "Drive the browser of a browser sandbox: status, actions, screenshots and CDP links",
		Long: `A sandbox of a browser profile (such as browser-playwright) runs Chromium.
Run actions in its active tab (genesis browser actions, open, screenshot), or
connect a CDP or Playwright client of your own to it (genesis browser status
for the endpoints, which take the API key; genesis browser link for URLs that
need none).`,
	}
	cmd.AddCommand(newRecordCmd(a, "active tab", "records the browser's active tab (Chromium's screencast, encoded by ffmpeg inside the sandbox)",
		(*client.Client).StartBrowserRecording, (*client.Client).StopBrowserRecording, (*client.Client).GetBrowserRecording))
	cmd.AddCommand(newBrowserStatusCmd(a), newBrowserActionsCmd(a), newBrowserOpenCmd(a),
		newBrowserScreenshotCmd(a), newBrowserLinkCmd(a), newBrowserCDPURLCmd(a), newBrowserDownloadsCmd(a), newBrowserProfileCmd(a))
	return cmd
}

// newBrowserProfileCmd builds "genesis browser profile save|load".
func newBrowserProfileCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Save a browser's profile (cookies, storage) as an artifact, or load one into another browser",
		Long: `Both stop the sandbox's Chromium (closing its pages) and start it again with the
profile. A saved profile is an artifact: genesis artifact get fetches it, and any
browser sandbox of yours can load it.`,
	}
	var name string
	save := &cobra.Command{
		Use:   "save SANDBOX [--name FILE]",
		Short: "Save the browser profile as a tar.gz artifact and print its id",
		Args:  exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserProfile, error) {
				return c.SaveBrowserProfile(ctx, args[0], name)
			}, func(p *client.BrowserProfile) error {
				_, err := fmt.Fprintln(a.stdout, p.Artifact.ID)
				a.warnf("saved %s (%d bytes, sha256 %s) in %d ms", p.Artifact.Name, p.Artifact.Size, p.Artifact.SHA256, p.DurationMS)
				return err
			})
		}),
	}
	save.Flags().StringVar(&name, "name", "", "the artifact's file name (default browser-profile.tar.gz)")
	load := &cobra.Command{
		Use:   "load SANDBOX ARTIFACT",
		Short: "Replace the browser profile with a saved one",
		Args:  exactArgs(2, "a sandbox id and the artifact id of a saved profile"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserProfile, error) {
				return c.LoadBrowserProfile(ctx, args[0], args[1])
			}, func(p *client.BrowserProfile) error {
				_, err := fmt.Fprintf(a.stdout, "loaded %s into %s: %d entries, %d bytes, in %d ms\n", p.Artifact.ID, p.SandboxID, p.Entries, p.Bytes, p.DurationMS)
				return err
			})
		}),
	}
	cmd.AddCommand(save, load)
	return cmd
}

// newBrowserCDPURLCmd builds "genesis browser cdp-url SANDBOX".
func newBrowserCDPURLCmd(a *app) *cobra.Command {
	var link bool
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "cdp-url SANDBOX [--link [--ttl 10m]]",
		Short: "Print the DevTools endpoint for chromium.connectOverCDP, Puppeteer or chromedp",
		Long: `Prints the browser's DevTools endpoint through the service. It takes the API key as
an Authorization header (chromium.connectOverCDP(url, {headers})). With --link it prints a
capability URL instead, which needs no key until --ttl passes or the sandbox ends.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if !link {
				return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserStatus, error) {
					return c.BrowserStatus(ctx, args[0])
				}, func(s *client.BrowserStatus) error {
					_, err := fmt.Fprintln(a.stdout, s.CDPURL)
					return err
				})
			}
			if ttl < time.Second {
				return usageErrorf("--ttl must be at least 1s")
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserLink, error) {
				return c.CreateBrowserLink(ctx, args[0], ttl)
			}, func(l *client.BrowserLink) error {
				_, err := fmt.Fprintln(a.stdout, l.CDPURL)
				a.warnf("valid until %s, or until the sandbox ends; whoever has it drives the browser", formatTime(l.ExpiresAt))
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&link, "link", false, "print a capability URL that needs no API key")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "with --link: how long it works (whole seconds)")
	return cmd
}

// newBrowserDownloadsCmd builds "genesis browser downloads SANDBOX".
func newBrowserDownloadsCmd(a *app) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "downloads SANDBOX [--keep [NAME...]]",
		Short: "List the browser's downloads with their sha256; --keep keeps them as artifacts",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || (!keep && len(args) > 1) {
				return usageErrorf("want one sandbox id (and, with --keep, the names to keep)")
			}
			return nil
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserDownloadList, error) {
				if keep {
					return c.KeepBrowserDownloads(ctx, args[0], args[1:]...)
				}
				return c.BrowserDownloads(ctx, args[0])
			}, func(l *client.BrowserDownloadList) error {
				return printTable(a.stdout, "NAME\tSIZE\tSHA256\tARTIFACT", l.Items, func(w io.Writer, d client.BrowserDownload) {
					sum, art := d.SHA256, ""
					if d.Partial {
						sum = "(downloading)"
					}
					if d.Artifact != nil {
						art = d.Artifact.ID
					}
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", d.Name, d.Size, sum, art)
				})
			})
		}),
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the named downloads (all complete ones when none is named) as artifacts")
	return cmd
}

// newBrowserStatusCmd builds "genesis browser status SANDBOX".
func newBrowserStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status SANDBOX",
		Short: "Show whether the browser is ready, its versions and its endpoints",
		Args:  exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserStatus, error) {
				return c.BrowserStatus(ctx, args[0])
			}, func(s *client.BrowserStatus) error {
				ready := "no (Chromium does not answer yet)"
				if s.Ready {
					ready = "yes"
				}
				session := "no"
				if s.Session {
					session = "yes (the actions API holds a connection)"
				}
				others := map[string]string{}
				for k, v := range s.Versions {
					if k != "chromium" && k != "playwright" {
						others[k] = v
					}
				}
				return printFields(a.stdout, []field{
					{"Sandbox", s.SandboxID},
					{"Ready", ready},
					{"Browser", s.Browser},
					{"Chromium", s.Versions["chromium"]},
					{"Playwright", s.Versions["playwright"]},
					{"Other versions", joinMap(others)},
					{"CDP URL", s.CDPURL},
					{"Playwright URL", s.PlaywrightURL},
					{"Downloads", s.DownloadsDir},
					{"Session", session},
				})
			})
		}),
	}
}

// newBrowserActionsCmd builds "genesis browser actions SANDBOX [FILE|-]".
func newBrowserActionsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "actions SANDBOX [FILE|-]",
		Short: "Run a list of browser actions from a JSON file or stdin",
		Long: `Reads {"actions":[...]} or a bare JSON array of actions from FILE, or from
stdin without FILE or for "-", and runs them in order in the browser's
active tab. Each action is an object with a "type" (navigate, back, forward,
reload, click, fill, type, press, hover, scroll, wait, evaluate, text,
screenshot, upload, tab_new, tab_switch, tab_close, tabs) and its fields,
for example:

  [{"type":"navigate","url":"https://example.com"},
   {"type":"click","selector":"a"},
   {"type":"screenshot","full_page":true}]

Prints one line per action run: its index, type, whether it succeeded, how
long it took, its error, the artifact a screenshot was kept as (download it
with genesis artifacts get) and its value. The actions stop at the first
that fails; then the exit status is 1.`,
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
			actions, err := a.readBrowserActions(name)
			if err != nil {
				return err
			}
			res, err := a.runBrowserActions(cmd, args[0], actions)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := printJSON(a.stdout, res); err != nil {
					return err
				}
			} else if err := a.printBrowserResults(res); err != nil {
				return err
			}
			if !res.OK {
				if !a.jsonOutput() {
					if f := failedAction(res); f != nil {
						a.warnf("action %d (%s) failed; the actions after it did not run", f.Index, f.Type)
					}
				}
				return &exitError{code: 1}
			}
			return nil
		}),
	}
}

// readBrowserActions reads the actions from a file or, for "-", from
// stdin: {"actions":[...]} or a bare array. Unknown fields are refused, so
// a misspelt field is not silently dropped.
func (a *app) readBrowserActions(name string) ([]client.BrowserAction, error) {
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
		return nil, usageErrorf("reading the actions: %v", err)
	}
	b = bytes.TrimSpace(b)
	var actions []client.BrowserAction
	if len(b) > 0 && b[0] == '[' {
		err = decodeStrict(b, &actions)
	} else {
		var req client.BrowserActionsRequest
		err = decodeStrict(b, &req)
		actions = req.Actions
	}
	if err != nil {
		return nil, usageErrorf("the actions are not {\"actions\":[...]} or a JSON array of actions: %v", err)
	}
	if len(actions) == 0 {
		return nil, usageErrorf("no actions to run")
	}
	for i, act := range actions {
		if act.Type == "" {
			return nil, usageErrorf("action %d has no type", i)
		}
	}
	return actions, nil
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// runBrowserActions runs actions in a sandbox's browser under --timeout.
func (a *app) runBrowserActions(cmd *cobra.Command, sandbox string, actions []client.BrowserAction) (*client.BrowserActionsResult, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.callContext(cmd.Context())
	defer cancel()
	return c.BrowserActions(ctx, sandbox, actions...)
}

// printBrowserResults prints one line per action run.
func (a *app) printBrowserResults(res *client.BrowserActionsResult) error {
	return printTable(a.stdout, "INDEX\tTYPE\tOK\tMS\tERROR\tARTIFACT\tVALUE", res.Results, func(tw io.Writer, r client.BrowserActionResult) {
		art := ""
		if r.Artifact != nil {
			art = r.Artifact.ID
		}
		fmt.Fprintf(tw, "%d\t%s\t%t\t%d\t%s\t%s\t%s\n", r.Index, r.Type, r.OK, r.Ms,
			orDash(oneLine(r.Error)), orDash(art), orDash(compactJSON(r.Value)))
	})
}

// failedAction is the result that stopped a run, if any.
func failedAction(res *client.BrowserActionsResult) *client.BrowserActionResult {
	for i := range res.Results {
		if !res.Results[i].OK {
			return &res.Results[i]
		}
	}
	return nil
}

// actionsError is the error of a run that stopped at a failing action.
func actionsError(res *client.BrowserActionsResult) error {
	if f := failedAction(res); f != nil && f.Error != "" {
		return fmt.Errorf("%s failed: %s", f.Type, f.Error)
	}
	return errors.New("the browser actions failed")
}

// compactJSON renders a JSON value on one line ("" for none).
func compactJSON(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return oneLine(string(v))
	}
	return buf.String()
}

// oneLine folds line breaks and tabs into spaces, for a table cell.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}

// newBrowserOpenCmd builds "genesis browser open SANDBOX URL".
func newBrowserOpenCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "open SANDBOX URL",
		Short: "Navigate the browser's active tab to URL; prints where it ended up",
		Args:  exactArgs(2, "a sandbox id and a URL"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			res, err := a.runBrowserActions(cmd, args[0], []client.BrowserAction{{Type: "navigate", URL: args[1]}})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := printJSON(a.stdout, res); err != nil {
					return err
				}
				if !res.OK {
					return &exitError{code: 1}
				}
				return nil
			}
			status := "ok"
			if f := failedAction(res); f != nil || !res.OK {
				status = "failed"
				if f != nil && f.Error != "" {
					status += ": " + oneLine(f.Error)
				}
			} else if len(res.Results) > 0 {
				status += " (" + strconv.FormatInt(res.Results[0].Ms, 10) + " ms)"
			}
			if err := printFields(a.stdout, []field{
				{"URL", res.URL}, {"Title", res.Title}, {"Tab", res.Tab}, {"Status", status},
			}); err != nil {
				return err
			}
			if !res.OK {
				return &exitError{code: 1}
			}
			return nil
		}),
	}
}

// browserShot is what genesis browser screenshot -o json prints.
type browserShot struct {
	Artifact *client.Artifact `json:"artifact"`
	File     string           `json:"file"`
	URL      string           `json:"url"`
	Title    string           `json:"title"`
}

// newBrowserScreenshotCmd builds "genesis browser screenshot SANDBOX".
func newBrowserScreenshotCmd(a *app) *cobra.Command {
	var (
		url      string
		fullPage bool
		dest     string
	)
	cmd := &cobra.Command{
		Use:   "screenshot SANDBOX [--url URL] [--full-page] [-O FILE]",
		Short: "Take a screenshot of the active tab and download it; prints its artifact id",
		Long: `Takes a screenshot of the browser's active tab (after navigating to --url,
if given), keeps it as an artifact and downloads it to FILE (default
screenshot.png) through a temporary file, checked against its SHA-256. A
FILE ending in .jpg or .jpeg asks for a JPEG, any other a PNG. Prints the
artifact's id; genesis artifacts get ID downloads it again.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if dest == "" {
				return usageErrorf("--output-file must not be empty")
			}
			shot := client.BrowserAction{Type: "screenshot", FullPage: fullPage, Name: filepath.Base(dest)}
			switch strings.ToLower(filepath.Ext(dest)) {
			case ".jpg", ".jpeg":
				shot.Format = "jpeg"
			default:
				shot.Format = "png"
			}
			var actions []client.BrowserAction
			if url != "" {
				actions = append(actions, client.BrowserAction{Type: "navigate", URL: url})
			}
			actions = append(actions, shot)

			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			res, err := c.BrowserActions(ctx, args[0], actions...)
			if err != nil {
				return err
			}
			if !res.OK {
				return actionsError(res)
			}
			var art *client.Artifact
			for _, r := range res.Results {
				if r.Type == "screenshot" && r.Artifact != nil {
					art = r.Artifact
				}
			}
			if art == nil {
				return errors.New("the screenshot came back without an artifact")
			}
			d, err := c.DownloadArtifact(ctx, art.ID, nil)
			if err != nil {
				return err
			}
			defer d.Body.Close()
			want := art.SHA256
			if want == "" {
				want = strings.Trim(d.ETag, `"`)
			}
			if err := writeFileAtomic(dest, 0o644, func(w io.Writer) error { return copyChecked(w, d.Body, want) }); err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, browserShot{Artifact: art, File: dest, URL: res.URL, Title: res.Title})
			}
			if _, err := fmt.Fprintln(a.stdout, art.ID); err != nil {
				return err
			}
			a.warnf("wrote %s (%d bytes) of %s", dest, art.Size, orDash(res.URL))
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&url, "url", "", "navigate to this URL first")
	fl.BoolVar(&fullPage, "full-page", false, "capture the whole page, not only the viewport")
	fl.StringVarP(&dest, "output-file", "O", "screenshot.png", "write the screenshot to this file")
	return cmd
}

// newBrowserLinkCmd builds "genesis browser link SANDBOX".
func newBrowserLinkCmd(a *app) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "link SANDBOX [--ttl 10m]",
		Short: "Make capability URLs of the browser: CDP (and Playwright) endpoints that need no API key",
		Long: `Prints a CDP URL for chromium.connectOverCDP and, on a second line when the
profile serves it, a Playwright URL for browserType.connect. They work without an API key
until they expire or the sandbox ends: whoever has them drives the browser.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if ttl < time.Second {
				return usageErrorf("--ttl must be at least 1s")
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.BrowserLink, error) {
				return c.CreateBrowserLink(ctx, args[0], ttl)
			}, func(l *client.BrowserLink) error {
				if _, err := fmt.Fprintln(a.stdout, l.CDPURL); err != nil {
					return err
				}
				if l.PlaywrightURL != "" {
					if _, err := fmt.Fprintln(a.stdout, l.PlaywrightURL); err != nil {
						return err
					}
				}
				a.warnf("valid until %s, or until the sandbox ends; whoever has them drives the browser", formatTime(l.ExpiresAt))
				return nil
			})
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "how long the links work (whole seconds)")
	return cmd
}
