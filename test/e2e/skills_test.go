package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/driver"
)

// reportSkill is a skill whose script reads its stdin, an input file and
// its arguments, writes two outputs, and reports what it can see of its
// sandbox: its kernel, its network interfaces, and whether it can write
// its own skill folder.
var reportSkill = map[string]string{
	"SKILL.md": `---
name: csv-report
description: Count the rows of a CSV and write a report.
license: MIT
---
# CSV report
Run scripts/report.py with the CSV at /workspace/data.csv.
`,
	"scripts/report.py": `import json, os, sys, platform
rows = open("/workspace/data.csv").read().strip().splitlines()
stdin = sys.stdin.read().strip()
os.makedirs(os.environ["SKILL_OUTPUT_DIR"] + "/sub", exist_ok=True)
with open(os.environ["SKILL_OUTPUT_DIR"] + "/report.txt", "w") as f:
    f.write("rows=%d\n" % len(rows))
with open(os.environ["SKILL_OUTPUT_DIR"] + "/sub/summary.json", "w") as f:
    json.dump({"rows": len(rows), "stdin": stdin}, f)
try:
    open(os.environ["SKILL_DIR"] + "/scripts/report.py", "a").write("# changed")
    ro = "writable"
except OSError:
    ro = "read-only"
ifaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
print(json.dumps({"rows": len(rows), "args": sys.argv[1:], "stdin": stdin, "skill": ro,
                  "ifaces": ifaces, "kernel": platform.release(), "name": os.environ["SKILL_NAME"]}))
`,
	"scripts/fail.sh": "echo about to fail >&2\nexit 7\n",
	"data/notes.txt":  "api_key = \"abcdefghijklmnop1234\"\nsee https://docs.example.test/csv\n",
}

// skillArchive packs files as a tar.gz with a top-level folder.
func skillArchive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "skill/" + name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pushSkill posts an archive and returns the status and body.
func pushSkill(t *testing.T, svc *service, archive []byte, contentType string, out any) (int, string) {
	t.Helper()
	return pushSkillAs(t, svc, svc.e.apiKey, archive, contentType, out)
}

// pushSkillAs is pushSkill with the API key key.
func pushSkillAs(t *testing.T, svc *service, key string, archive []byte, contentType string, out any) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(callCtx(t), "POST", svc.url()+"/v1/skills", bytes.NewReader(archive))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
	}
	return resp.StatusCode, string(b)
}

type skillRevision struct {
	Name     string `json:"name"`
	Revision int64  `json:"revision"`
	Digest   string `json:"digest"`
	Files    []struct {
		Path string `json:"path"`
	} `json:"files"`
	Report struct {
		Scripts    map[string][]string `json:"scripts"`
		Hosts      []string            `json:"hosts"`
		Undeclared []string            `json:"undeclared_hosts"`
		Secrets    []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"secrets"`
	} `json:"report"`
}

type skillRun struct {
	Revision  int64  `json:"revision"`
	Digest    string `json:"digest"`
	SandboxID string `json:"sandbox_id"`
	JobID     string `json:"job_id"`
	Decision  struct {
		Risk    string `json:"risk"`
		Runtime string `json:"runtime"`
		Network string `json:"network"`
	} `json:"decision"`
	State     string            `json:"state"`
	ExitCode  *int              `json:"exit_code"`
	Stdout    string            `json:"stdout"`
	Stderr    string            `json:"stderr"`
	Artifacts []client.Artifact `json:"artifacts"`
}

// scriptReport is what scripts/report.py prints.
type scriptReport struct {
	Rows   int      `json:"rows"`
	Args   []string `json:"args"`
	Stdin  string   `json:"stdin"`
	Skill  string   `json:"skill"`
	Ifaces []string `json:"ifaces"`
	Kernel string   `json:"kernel"`
	Name   string   `json:"name"`
}

// TestSkills: a tenant pushes a skill (an immutable revision with its
// digest and a static report); a run of its script goes to a sandbox of its
// own under runsc with no network, the skill read-only, and returns its
// output and artifacts; the skills MCP server gives the same result to a
// stock MCP client; bad archives and bad runs are refused and change
// nothing; a copy altered on the host is caught by the digest and never
// runs.
func TestSkills(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "skill-python-basic")
	if !strings.Contains(strings.Join(e.runtimes(t), ","), "runsc") {
		t.Fatal("runsc is not available; an uploaded skill needs it")
	}
	svc := e.start(t)
	c := svc.client()

	var rev skillRevision
	archive := skillArchive(t, reportSkill)
	if code, body := pushSkill(t, svc, archive, "application/gzip", &rev); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	if rev.Name != "csv-report" || rev.Revision != 1 || !strings.HasPrefix(rev.Digest, "sha256:") || len(rev.Files) != 4 {
		t.Fatalf("revision %+v", rev)
	}
	if strings.Join(rev.Report.Scripts["python"], ",") != "scripts/report.py" || strings.Join(rev.Report.Scripts["shell"], ",") != "scripts/fail.sh" ||
		strings.Join(rev.Report.Undeclared, ",") != "docs.example.test" || len(rev.Report.Secrets) != 1 || rev.Report.Secrets[0].Path != "data/notes.txt" {
		t.Errorf("report %+v", rev.Report)
	}
	// The same content again is the same revision.
	var again skillRevision
	if code, body := pushSkill(t, svc, archive, "application/gzip", &again); code != 200 || again.Revision != 1 || again.Digest != rev.Digest {
		t.Fatalf("push again: %d %s", code, body)
	}

	run := func(t *testing.T, req map[string]any) skillRun {
		t.Helper()
		var r skillRun
		if code, body := apiJSON(t, svc, "POST", "/v1/skills/csv-report/runs", req, &r); code != 200 {
			t.Fatalf("run: %d %s", code, body)
		}
		return r
	}
	req := map[string]any{"script": "scripts/report.py", "args": []string{"--fast", "x y"}, "stdin": "from stdin",
		"files": []map[string]string{{"path": "data.csv", "content": "a,b\n1,2\n3,4\n"}}}
	r := run(t, req)
	var out scriptReport
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil || r.State != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("run %+v: %v", r, err)
	}
	var host syscall.Utsname
	if err := syscall.Uname(&host); err != nil {
		t.Fatal(err)
	}
	hostKernel := utsString(host.Release[:])
	if out.Rows != 3 || strings.Join(out.Args, "|") != "--fast|x y" || out.Stdin != "from stdin" || out.Name != "csv-report" {
		t.Errorf("the script saw %+v", out)
	}
	if out.Skill != "read-only" {
		t.Errorf("the skill's folder is %s inside the run", out.Skill)
	}
	if strings.Join(out.Ifaces, ",") != "lo" {
		t.Errorf("network interfaces in the run: %v, want only lo", out.Ifaces)
	}
	if r.Decision.Runtime != "runsc" || r.Decision.Risk != "medium" || r.Decision.Network != "none" || out.Kernel == hostKernel {
		t.Errorf("decision %+v, kernel %q (host %q): want runsc, gVisor's own kernel", r.Decision, out.Kernel, hostKernel)
	}
	sb, err := c.GetSandbox(callCtx(t), r.SandboxID)
	if err != nil || sb.Runtime != "runsc" || sb.State != "destroyed" || sb.Profile != "skill-python-basic" {
		t.Errorf("the run's sandbox afterwards: %+v %v", sb, err)
	}
	// Its outputs are artifacts, downloadable after the sandbox is gone.
	arts := map[string]string{}
	for _, a := range r.Artifacts {
		d, err := c.DownloadArtifact(callCtx(t), a.ID, nil)
		if err != nil {
			t.Fatalf("artifact %s: %v", a.Path, err)
		}
		body, err := io.ReadAll(d.Body)
		d.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		arts[a.Path] = string(body)
	}
	if arts["out/report.txt"] != "rows=3\n" || arts["out/sub/summary.json"] != `{"rows": 3, "stdin": "from stdin"}` || len(arts) != 2 {
		t.Errorf("artifacts %v", arts)
	}

	// A failing script is a run that failed, with its exit code and stderr.
	f := run(t, map[string]any{"script": "scripts/fail.sh"})
	if f.State != "failed" || f.ExitCode == nil || *f.ExitCode != 7 || !strings.Contains(f.Stderr, "about to fail") {
		t.Errorf("failing run %+v", f)
	}

	// The skills MCP server: the same skill, the same result.
	cs := skillsMCP(t, svc)
	res, err := cs.ListResources(callCtx(t), nil)
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "skill://csv-report/SKILL.md" {
		t.Fatalf("resources %+v %v", res, err)
	}
	rr, err := cs.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: "skill://csv-report/scripts/report.py"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != reportSkill["scripts/report.py"] {
		t.Fatalf("read resource: %+v %v", rr, err)
	}
	margs := map[string]any{"skill": "csv-report"}
	for k, v := range req {
		margs[k] = v
	}
	tr, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "run_skill_script", Arguments: margs})
	if err != nil || tr.IsError {
		t.Fatalf("run_skill_script: %+v %v: %s", tr, err, toolText(tr))
	}
	var mout scriptReport
	if err := json.Unmarshal([]byte(toolText(tr)), &mout); err != nil {
		t.Fatalf("run_skill_script text %q: %v", toolText(tr), err)
	}
	out.Kernel, mout.Kernel = "", "" // the same either way; compared above
	if fmt.Sprint(mout) != fmt.Sprint(out) {
		t.Errorf("through MCP %+v, through the API %+v", mout, out)
	}
	var structured struct {
		Runtime   string `json:"runtime"`
		Digest    string `json:"digest"`
		Artifacts []struct {
			Path string `json:"path"`
		} `json:"artifacts"`
	}
	sc, _ := json.Marshal(tr.StructuredContent)
	if err := json.Unmarshal(sc, &structured); err != nil || structured.Runtime != "runsc" || structured.Digest != rev.Digest || len(structured.Artifacts) != 2 {
		t.Errorf("structured result %s: %v", sc, err)
	}
	bad, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "run_skill_script", Arguments: map[string]any{"skill": "csv-report", "script": "../../etc/passwd"}})
	if err != nil || !bad.IsError || !strings.Contains(toolText(bad), "inside the skill") {
		t.Errorf("a script outside the skill through MCP: %+v %v", bad, err)
	}

	// Bad archives and bad runs: clear errors, nothing stored.
	for name, tc := range map[string]struct {
		files map[string]string
		code  string
	}{
		"no SKILL.md":     {map[string]string{"README.md": "x"}, "skill_manifest_missing"},
		"bad SKILL.md":    {map[string]string{"SKILL.md": "no front matter"}, "skill_manifest_invalid"},
		"dot-dot entry":   {map[string]string{"SKILL.md": reportSkill["SKILL.md"], "../../escape.py": "x"}, "skill_path_escapes"},
		"unnamed section": {map[string]string{"SKILL.md": "---\ndescription: d\n---\n"}, "skill_manifest_invalid"},
	} {
		if code, body := pushSkill(t, svc, skillArchive(t, tc.files), "application/gzip", nil); code != 400 || !strings.Contains(body, tc.code) {
			t.Errorf("%s: %d %s, want 400 %s", name, code, body, tc.code)
		}
	}
	var symlink bytes.Buffer
	tw := tar.NewWriter(&symlink)
	_ = tw.WriteHeader(&tar.Header{Name: "SKILL.md", Mode: 0o644, Size: int64(len(reportSkill["SKILL.md"]))})
	_, _ = tw.Write([]byte(reportSkill["SKILL.md"]))
	_ = tw.WriteHeader(&tar.Header{Name: "passwd", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	_ = tw.Close()
	if code, body := pushSkill(t, svc, symlink.Bytes(), "application/x-tar", nil); code != 400 || !strings.Contains(body, "skill_link_refused") {
		t.Errorf("symlink out: %d %s", code, body)
	}
	if code, body := pushSkill(t, svc, archive, "text/plain", nil); code != 400 || !strings.Contains(body, "unsupported_media_type") {
		t.Errorf("text/plain push: %d %s", code, body)
	}
	for name, tc := range map[string]struct {
		path string
		req  map[string]any
		want int
		code string
	}{
		"script outside":  {"/v1/skills/csv-report/runs", map[string]any{"script": "../x.py"}, 400, "skill_script_outside"},
		"missing script":  {"/v1/skills/csv-report/runs", map[string]any{"script": "scripts/none.py"}, 404, "skill_script_not_found"},
		"not runnable":    {"/v1/skills/csv-report/runs", map[string]any{"script": "data/notes.txt"}, 400, "skill_script_not_runnable"},
		"missing skill":   {"/v1/skills/no-such/runs", map[string]any{"script": "a.py"}, 404, "skill_not_found"},
		"missing version": {"/v1/skills/csv-report/runs", map[string]any{"script": "scripts/report.py", "revision": 9}, 404, "skill_not_found"},
	} {
		if code, body := apiJSON(t, svc, "POST", tc.path, tc.req, nil); code != tc.want || !strings.Contains(body, tc.code) {
			t.Errorf("%s: %d %s, want %d %s", name, code, body, tc.want, tc.code)
		}
	}
	var list struct {
		Items []skillRevision `json:"items"`
	}
	if code, body := apiJSON(t, svc, "GET", "/v1/skills", nil, &list); code != 200 || len(list.Items) != 1 || list.Items[0].Revision != 1 {
		t.Errorf("skills after the refused pushes: %d %s", code, body)
	}

	// A copy altered on the host is caught by its digest: the run uses the
	// stored revision, never the altered file.
	unpacked := filepath.Join(e.dataDir, "skills", strings.TrimPrefix(rev.Digest, "sha256:"), "scripts", "report.py")
	if err := os.WriteFile(unpacked, []byte("print('tampered')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := run(t, req)
	if strings.Contains(r2.Stdout, "tampered") || !strings.Contains(r2.Stdout, `"rows": 3`) || r2.Digest != rev.Digest {
		t.Errorf("run after the host copy was altered: %+v", r2)
	}
	if b, _ := os.ReadFile(unpacked); string(b) != reportSkill["scripts/report.py"] {
		t.Errorf("the altered copy was not replaced: %q", b)
	}

	// A second revision; the first stays runnable by number.
	changed := map[string]string{}
	for k, v := range reportSkill {
		changed[k] = v
	}
	changed["scripts/report.py"] = "print('revision two')\n"
	var rev2 skillRevision
	if code, body := pushSkill(t, svc, skillArchive(t, changed), "application/gzip", &rev2); code != 201 || rev2.Revision != 2 || rev2.Digest == rev.Digest {
		t.Fatalf("push revision 2: %d %s", code, body)
	}
	if r := run(t, map[string]any{"script": "scripts/report.py"}); strings.TrimSpace(r.Stdout) != "revision two" || r.Revision != 2 {
		t.Errorf("latest run %+v", r)
	}
	if r := run(t, map[string]any{"script": "scripts/report.py", "revision": 1, "files": req["files"]}); !strings.Contains(r.Stdout, `"rows": 3`) || r.Revision != 1 {
		t.Errorf("revision 1 run %+v", r)
	}
	// The CLI: a folder pushed as it is, and a run whose exit status is the
	// script's.
	dir := t.TempDir()
	for name, body := range changed {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := svc.cli(t, "skill", "push", dir); r.code != 0 || !strings.Contains(r.stdout, "csv-report 2 "+rev2.Digest) {
		t.Errorf("genesis skill push of revision 2's folder: %v", r)
	}
	if r := svc.cli(t, "skill", "run", "csv-report", "scripts/fail.sh"); r.code != 7 || !strings.Contains(r.stderr, "about to fail") {
		t.Errorf("genesis skill run: %v", r)
	}

	// No run leaves a sandbox behind.
	eventually(t, callTimeout, "the runs' sandboxes to be gone", func() (bool, string) {
		left := containers(t, "label="+driver.LabelProfile+"=skill-python-basic", "label="+driver.LabelInstance+"="+e.instance())
		return len(left) == 0, strings.Join(left, ",")
	})
}

// utsString is a NUL-terminated utsname field.
func utsString(f []int8) string {
	b := make([]byte, 0, len(f))
	for _, c := range f {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// skillsMCP connects the Go SDK's client to the tenant's skills MCP
// server with the tenant's API key.
func skillsMCP(t *testing.T, svc *service) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cl := sdk.NewClient(&sdk.Implementation{Name: "e2e-skills", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: svc.url() + "/v1/mcp/skills",
		HTTPClient: &http.Client{Transport: bearer{svc.e.apiKey, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect to the skills MCP server: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestSkillNetwork: a skill that declares the one host it needs reaches
// exactly that host (the test's own "internet"), under runsc; with the
// operator's allow_network off, its runs are refused.
func TestSkillNetwork(t *testing.T) {
	t.Parallel()
	in := startInternet(t)
	e := newEnv(t, networkConfig(in, filepath.Join(t.TempDir(), "unused.secret")))
	e.requireImage(t, "skill-python-basic")
	t.Cleanup(func() {
		if inst := e.instance(); inst != "" {
			dockerCmdQuiet("rm", "-f", "genesis-egress-"+inst)
		}
	})
	svc := e.start(t)
	// The allowed fetch has 30 s, so a slow gateway on a loaded machine does
	// not make it fail; the fetches expected to fail keep 3 s, which bounds
	// only how long the refusal is waited for.
	files := map[string]string{
		"SKILL.md": "---\nname: fetcher\ndescription: Fetch one page.\nmetadata:\n  network: allowed.test\n---\nRun fetch.py.\n",
		"fetch.py": `import socket, urllib.request
def get(u, t=3):
    try:
        return urllib.request.urlopen(u, timeout=t).read().decode().strip()
    except Exception as e:
        return "error: %s" % type(e).__name__
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except Exception as e:
        return "error: %s" % type(e).__name__
print(get("http://allowed.test/", 30))
print(get("http://other.test/"))
print(tcp("` + in.other + `", 80))
`,
	}
	if code, body := pushSkill(t, svc, skillArchive(t, files), "application/gzip", nil); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	var r skillRun
	if code, body := apiJSON(t, svc, "POST", "/v1/skills/fetcher/runs", map[string]any{"script": "fetch.py"}, &r); code != 200 {
		t.Fatalf("run: %d %s", code, body)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Decision.Runtime != "runsc" || r.Decision.Network != "allowlist" || len(lines) != 3 || lines[0] != "hello from allowed via http" ||
		!strings.HasPrefix(lines[1], "error") || !strings.HasPrefix(lines[2], "error") {
		t.Errorf("run %+v: lines %q", r, lines)
	}

	// The same skill on a service whose operator allows no network.
	e2 := newEnv(t, "skills:\n  allow_network: false\n")
	svc2 := e2.start(t)
	if code, body := pushSkill(t, svc2, skillArchive(t, files), "application/gzip", nil); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	if code, body := apiJSON(t, svc2, "POST", "/v1/skills/fetcher/runs", map[string]any{"script": "fetch.py"}, nil); code != 403 ||
		!strings.Contains(body, "skill_network_not_allowed") {
		t.Errorf("a networked skill without allow_network: %d %s", code, body)
	}
}
