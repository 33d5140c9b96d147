package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/testenv"
)

// consoleRun is the JSON line test/browserclient/console.mjs prints.
type consoleRun struct {
	OK            bool   `json:"ok"`
	Error         string `json:"error"`
	ConsoleErrors []struct {
		Phase, Who, Text string
	} `json:"console_errors"`
	Screenshots      []string `json:"screenshots"`
	WrongKeyMessage  string   `json:"wrong_key_message"`
	StoredAfterWrong int      `json:"stored_after_wrong_key"`
	Who              string   `json:"who"`
	KeyInURL         bool     `json:"key_in_url"`
	SandboxID        string   `json:"sandbox_id"`
	SandboxFacts     string   `json:"sandbox_facts"`
	SeenWhileRunning bool     `json:"seen_while_running"`
	JobLog           string   `json:"job_log"`
	JobStderr        string   `json:"job_stderr"`
	JobExit          string   `json:"job_exit"`
	JobState         string   `json:"job_state"`
	Reconnects       int      `json:"reconnects"`
	CutConnections   int      `json:"cut_connections"`
	JobDownloadName  string   `json:"job_download_name"`
	FilesListed      []string `json:"files_listed"`
	FileText         string   `json:"file_text"`
	SearchResults    []string `json:"search_results"`
	History          string   `json:"history"`
	BigFileNote      string   `json:"big_file_note"`
	BigFileDownload  bool     `json:"big_file_download_offered"`
	TerminalText     string   `json:"terminal_text"`
	WSURLs           int      `json:"ws_urls"`
	WSURLsWithKey    int      `json:"ws_urls_with_key"`
	AuditPage1       []int64  `json:"audit_page1"`
	AuditPage2       []int64  `json:"audit_page2"`
	AuditBack        []int64  `json:"audit_back"`
	Theme            string   `json:"theme"`
	FirstTab         string   `json:"first_tab"`
	OtherList        []string `json:"other_list"`
	OtherPage        string   `json:"other_page"`
	TenantsText      string   `json:"tenants_text"`
	AdminRow         string   `json:"admin_row"`
	AdminRowLink     int      `json:"admin_row_link"`
	AdminPageTitle   string   `json:"admin_page_title"`
	JobID            string   `json:"job_id"`
	TerminalMarkRow  int      `json:"terminal_mark_row"`
	LessRows         []string `json:"less_rows"`
	TopHeader        string   `json:"top_header"`
	VITildes         int      `json:"vi_tildes"`
	VISaved          string   `json:"vi_saved"`
	SandboxJobs      []string `json:"sandbox_jobs"`
	AdminActing      string   `json:"admin_acting"`
	AdminAfterStop   int      `json:"admin_after_stop"`
	Renewed          bool     `json:"renewed"`
	ImageValues      []int    `json:"image_values"`
	ImageTexts       []string `json:"image_texts"`
	ImageStatus      string   `json:"image_status"`
	Perf             []struct {
		Listed int     `json:"listed"`
		MS     float64 `json:"ms"`
		DCL    float64 `json:"dcl"`
	} `json:"perf"`
}

// consoleArtifacts is where the console test saves its screenshots:
// $GENESIS_TEST_ARTIFACTS/console/NAME, else test/e2e/artifacts/console/NAME
// (git-ignored).
func consoleArtifacts(t *testing.T, name string) string {
	t.Helper()
	base := os.Getenv("GENESIS_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join(testenv.ModuleRoot(t), "test", "e2e", "artifacts")
	}
	dir := filepath.Join(base, "console", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runConsole(t *testing.T, args ...string) consoleRun {
	t.Helper()
	r, err := runConsoleFor(t, 6*time.Minute, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runConsoleFor runs console.mjs within limit. It may run on a goroutine
// of its own: it reports what failed instead of stopping the test.
func runConsoleFor(t *testing.T, limit time.Duration, args ...string) (consoleRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"console.mjs"}, args...)...)
	cmd.Dir = browserClientDir(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var r consoleRun
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return r, fmt.Errorf("console.mjs %v: %v: stdout %q stderr %q", args[0], err, out, stderr.String())
	}
	if !r.OK {
		return r, fmt.Errorf("console.mjs %s failed after %d screenshots: %s\nstderr: %s", args[0], len(r.Screenshots), r.Error, stderr.String())
	}
	return r, nil
}

// cutProxy forwards loopback TCP connections to the service and cuts every
// open one when its control URL is fetched: a dropped connection, as a
// network failure makes it, under the browser's feet.
type cutProxy struct {
	ln, ctl net.Listener
	mu      sync.Mutex
	conns   []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{}
	var err error
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if p.ctl, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.ln.Close(); p.ctl.Close(); p.cut() })
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	go func() {
		_ = http.Serve(p.ctl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, p.cut())
		}))
	}()
	return p
}

// cut closes every open connection through the proxy and answers how many
// browser connections there were.
func (p *cutProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	n := len(p.conns) / 2
	p.conns = nil
	return n
}

func (p *cutProxy) url() string    { return "http://" + p.ln.Addr().String() }
func (p *cutProxy) cutURL() string { return "http://" + p.ctl.Addr().String() + "/cut" }

// requireConsoleBuilt fails t when the binary carries the placeholder page
// instead of the console, and checks the headers every console answer has.
func requireConsoleBuilt(t *testing.T, svc *service) {
	t.Helper()
	resp, err := http.Get(svc.url() + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "make build") {
		t.Fatalf("the console is not built into sandbox-service (run make build, or make console): %d %s", resp.StatusCode, body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("console headers: %v", resp.Header)
	}
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]`).Match(body) {
		t.Fatalf("index.html has inline script: %s", body)
	}
}

// TestConsole drives the web console in this machine's Chromium with
// Playwright's own client against a real service, under runc and runsc:
// a wrong key's error, sign-in, a sandbox created from a profile, a command
// whose output streams in (paused and resumed by cursor: every line exactly
// once), a file uploaded, listed and viewed, a huge file refused with a
// download offered, echo in the terminal (opened with a ticket, no key in
// any URL), the audit log paged forward and back, the other views, another
// tenant's not-found page, the admin's tenants view; no console errors but
// the two expected failed loads; screenshots of each view.
func TestConsole(t *testing.T) {
	t.Parallel()
	otherKey, adminKey := "other_"+randomHex(t, 16), "admin_"+randomHex(t, 16)
	e := newEnv(t, fmt.Sprintf("admin_api_key: %q\ntenants:\n  default: {}\n  other: {api_keys: [%q]}\n", adminKey, otherKey))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	requireConsoleBuilt(t, svc)

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			out := consoleArtifacts(t, rt)
			proxy := startCutProxy(t, svc.addr)
			r := runConsole(t, "flow", proxy.url(), e.apiKey, otherKey, adminKey, out, "tool-basic", rt, proxy.cutURL())
			if r.SandboxID != "" {
				e.deleteOnCleanup(t, r.SandboxID)
			}
			t.Logf("%d screenshots in %s", len(r.Screenshots), out)
			for _, ce := range r.ConsoleErrors {
				allowed := (ce.Phase == "wrong key" && strings.Contains(ce.Text, "status of 401")) ||
					(ce.Phase == "drop" && strings.Contains(ce.Text, "net::")) ||
					(ce.Phase == "other tenant" && ce.Who == "other" && strings.Contains(ce.Text, "status of 404"))
				if !allowed {
					t.Errorf("console error (%s, %s): %s", ce.Phase, ce.Who, ce.Text)
				}
			}
			if !strings.Contains(r.WrongKeyMessage, "not accepted") || r.StoredAfterWrong != 0 {
				t.Errorf("wrong key: message %q, %d session items stored", r.WrongKeyMessage, r.StoredAfterWrong)
			}
			if r.KeyInURL || r.Who != "default" {
				t.Errorf("after sign-in: key in URL %v, header says %q", r.KeyInURL, r.Who)
			}
			sb, err := svc.client().GetSandbox(callCtx(t), r.SandboxID)
			if err != nil || sb.Runtime != rt || sb.Profile != "tool-basic" || sb.Metadata["purpose"] != "console-e2e" {
				t.Fatalf("the sandbox the console created: %+v %v", sb, err)
			}
			if !strings.Contains(r.SandboxFacts, rt) {
				t.Errorf("sandbox page facts %q lack the runtime", r.SandboxFacts)
			}
			var want strings.Builder
			for i := 1; i <= 50; i++ {
				fmt.Fprintf(&want, "line-%d\n", i)
			}
			want.WriteString("oops-1\n")
			if !r.SeenWhileRunning || r.JobLog != want.String() || r.JobStderr != "oops-1\n" || !strings.Contains(r.JobExit, "exit 3") || r.JobState != "failed" || r.Reconnects < 1 || r.CutConnections < 1 {
				t.Errorf("job log: seen while running %v, %d connections cut, %d reconnects, state %q, exit %q, stderr %q, log %q (want every line once)", r.SeenWhileRunning, r.CutConnections, r.Reconnects, r.JobState, r.JobExit, r.JobStderr, r.JobLog)
			}
			if !strings.HasSuffix(r.JobDownloadName, ".log") {
				t.Errorf("job download name %q", r.JobDownloadName)
			}
			if !slices.Contains(r.FilesListed, "hello.txt") || r.FileText != "hello from the console\n" {
				t.Errorf("files: listed %v, viewed %q", r.FilesListed, r.FileText)
			}
			if len(r.SearchResults) != 1 || !strings.Contains(r.SearchResults[0], "/workspace/hello.txt") {
				t.Errorf("search for the uploaded text: %q", r.SearchResults)
			}
			if !strings.Contains(r.History, "POST /v1/sandboxes/{id}/exec") || !strings.Contains(r.History, "PUT /v1/sandboxes/{id}/files") {
				t.Errorf("sandbox history: %q", r.History)
			}
			if got := execOK(t, svc.client(), r.SandboxID, "cat /workspace/hello.txt"); got.Stdout != "hello from the console\n" {
				t.Errorf("uploaded file in the sandbox: %q", got.Stdout)
			}
			if !strings.Contains(r.BigFileNote, "too large") || !r.BigFileDownload {
				t.Errorf("huge file: %q, download offered %v", r.BigFileNote, r.BigFileDownload)
			}
			if !strings.Contains(r.TerminalText, "\nhi-42") || r.WSURLs != 1 || r.WSURLsWithKey != 0 {
				t.Errorf("terminal: %d WebSockets, %d with the key; text %q", r.WSURLs, r.WSURLsWithKey, r.TerminalText)
			}
			if len(r.AuditPage1) != 3 || len(r.AuditPage2) == 0 || r.AuditPage2[0] <= r.AuditPage1[2] || !slices.Equal(r.AuditBack, r.AuditPage1) {
				t.Errorf("audit paging: %v then %v then back %v", r.AuditPage1, r.AuditPage2, r.AuditBack)
			}
			if r.Theme == "" || !strings.Contains(r.FirstTab, "Skip to content") {
				t.Errorf("theme %q, first Tab stop %q", r.Theme, r.FirstTab)
			}
			if slices.Contains(r.OtherList, r.SandboxID) || !strings.Contains(r.OtherPage, "Not found") {
				t.Errorf("another tenant: list %v, page %q", r.OtherList, r.OtherPage)
			}
			if !strings.Contains(r.AdminRow, "default") || r.AdminRowLink != 1 || !r.Renewed {
				t.Errorf("admin's listing of every tenant: row %q (%d links), renewed %v", r.AdminRow, r.AdminRowLink, r.Renewed)
			}
			// The terminal draws a full-screen program's cursor moves.
			if r.TerminalMarkRow != 4 {
				t.Errorf("the terminal drew MARK (at row 5, column 10) on screen row %d, want 4 (0-based)", r.TerminalMarkRow)
			}
			// less, top and vi of the image draw in the console's screen.
			if len(r.LessRows) != 3 || r.LessRows[0] != "1" || r.LessRows[2] != ":" || r.TopHeader != "top - " || r.VITildes < 5 || r.VISaved != "hello from vi" {
				t.Errorf("full-screen programs: less %q, top %q, vi %d empty-line markers, saved %q", r.LessRows, r.TopHeader, r.VITildes, r.VISaved)
			}
			if r.JobID == "" || !slices.Contains(r.SandboxJobs, r.JobID) {
				t.Errorf("the sandbox page's jobs %v lack the command's job %q", r.SandboxJobs, r.JobID)
			}
			// The admin opens the tenant's sandbox acting for its tenant.
			if !strings.Contains(r.AdminPageTitle, r.SandboxID) || !strings.Contains(r.AdminActing, "default") || r.AdminAfterStop != 0 {
				t.Errorf("admin acting for the tenant: page %q, banner %q, banner after stop %d", r.AdminPageTitle, r.AdminActing, r.AdminAfterStop)
			}
			if !strings.Contains(r.TenantsText, "other") {
				t.Errorf("admin tenants view: %q", r.TenantsText)
			}
			if len(r.Screenshots) < 12 {
				t.Errorf("%d screenshots, want one per view", len(r.Screenshots))
			}
		})
	}
}
