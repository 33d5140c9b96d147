package apiwire

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
	"genesis.dev/sandbox/internal/trace"
)

// The conversions of wire.go are checked by reflection, so that a field
// added to a domain type or to a wire type without the conversion that
// carries it fails here instead of vanishing from the API:
//
//   - every field of the answer is set when every field of the source is
//     (unset lists the exceptions, with why);
//   - for a mirror (a source whose fields all belong in the answer), every
//     field of the source changes the answer (dropped lists the exceptions).

// fixedTime is the time every filled time.Time holds.
var fixedTime = time.Date(2026, 12, 6, 7, 8, 9, 0, time.UTC)

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// fill sets every exported field reachable from v to a non-zero value:
// strings to their path (so that two fields are never equal), numbers to
// 7, pointers to a filled value, slices and maps to one filled element.
func fill(v reflect.Value, path string) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(fixedTime))
		return
	case v.Type() == rawType:
		v.Set(reflect.ValueOf(json.RawMessage(`{"k":1}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strings.TrimPrefix(path, "."))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), path)
		v.Set(s)
	case reflect.Array:
		if v.Len() > 0 {
			fill(v.Index(0), path)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, path+".key")
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, path)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		switch {
		case v.Type() == reflect.TypeFor[error]():
			v.Set(reflect.ValueOf(errors.New(path)))
		case reflect.TypeFor[string]().AssignableTo(v.Type()):
			v.Set(reflect.ValueOf(path))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() {
				name := path + "." + f.Name
				if f.Anonymous {
					name = path
				}
				fill(v.Field(i), name)
			}
		}
	}
}

// leaves lists the paths of the fields below t that fill sets and that are
// not structs themselves (time.Time is a leaf), through pointers and
// slice elements; embedded structs add no path element.
func leaves(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t == rawType {
			break
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == timeType {
		return []string{strings.TrimPrefix(path, ".")}
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := path + "." + f.Name
		if f.Anonymous {
			name = path
		}
		out = append(out, leaves(f.Type, name)...)
	}
	return out
}

// zeroAt zeroes the field at path below v (the first element of slices).
func zeroAt(v reflect.Value, path []string) {
	for v.Kind() == reflect.Pointer || (v.Kind() == reflect.Slice && v.Type() != rawType) {
		if v.IsNil() || (v.Kind() == reflect.Slice && v.Len() == 0) {
			return
		}
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		} else {
			v = v.Index(0)
		}
	}
	if len(path) == 0 {
		v.SetZero()
		return
	}
	f, ok := v.Type().FieldByName(path[0])
	if !ok {
		panic("no field " + path[0] + " in " + v.Type().String())
	}
	zeroAt(v.FieldByIndex(f.Index), path[1:])
}

// zeros lists the paths of the zero fields below v: nil pointers, empty
// slices and maps, zero values (a slice's first element stands for all).
func zeros(v reflect.Value, path string) []string {
	name := strings.TrimPrefix(path, ".")
	if v.Type() == timeType || v.Type() == rawType || v.Kind() != reflect.Struct && v.Kind() != reflect.Pointer && v.Kind() != reflect.Slice {
		if v.IsZero() {
			return []string{name}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{name}
		}
		return zeros(v.Elem(), path)
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{name}
		}
		return zeros(v.Index(0), path)
	}
	var out []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() {
			out = append(out, zeros(v.Field(i), path+"."+f.Name)...)
		}
	}
	return out
}

// conversion is one conversion of wire.go: from is its source type,
// convert applies it to a pointer to a source value.
type conversion struct {
	name    string
	from    reflect.Type
	convert func(src any) any
	// prep adjusts a filled source (one of two exclusive fields, say).
	prep func(src any)
	// mirror says that every field of the source belongs in the answer.
	mirror bool
	// unset are the answer's fields the conversion leaves zero, and why;
	// dropped the source's fields it does not carry (mirrors), and why.
	unset, dropped map[string]string
	// part says the answer holds much more than the source gives it: only
	// the source's side is checked.
	part bool
}

func conv[S, W any](name string, f func(*S) W) conversion {
	return conversion{name: name, from: reflect.TypeFor[S](), convert: func(src any) any { return f(src.(*S)) }}
}

func (c conversion) mirrored(dropped map[string]string) conversion {
	c.mirror, c.dropped = true, dropped
	return c
}

func (c conversion) leaving(unset map[string]string) conversion {
	c.unset = unset
	return c
}

func (c conversion) partOf() conversion {
	c.part = true
	return c
}

func (c conversion) prepared(f func(src any)) conversion {
	c.prep = f
	return c
}

// source is a filled source value.
func (c conversion) source() any {
	p := reflect.New(c.from)
	fill(p.Elem(), "")
	if c.prep != nil {
		c.prep(p.Interface())
	}
	return p.Interface()
}

// wireConversions is every conversion of wire.go.
func wireConversions() []conversion {
	setExec := func(src any) {
		s := src.(*jobs.ExecOutput)
		s.Job.ExitCode = new(int)
		*s.Job.ExitCode = 7
		s.Stdout, s.Stderr = []byte{0xff}, []byte{0xfe} // not UTF-8: the base64 fields are set
	}
	const (
		caller          = "the caller's: every route answers for one tenant"
		collectionTimes = "when the collection ran and its artifacts expire: each artifact carries its own"
		background      = "the handler's choice between StartJob and Exec"
		fromSnapshot    = "the handler's choice: the snapshots manager makes the sandbox from it"
		notInExit       = "the job's (GET /v1/jobs/{id}), not its exit's"
	)
	exec := func(req *api.ExecRequest) jobs.ExecInput {
		in, err := ExecIn("t", "s", *req)
		if err != nil {
			panic(err)
		}
		return in
	}
	execUnset := map[string]string{
		"SessionID": "a session's exec sets it", "Mode": "jobs sets it", "Streamed": "execStream sets it",
		"Reservation": "for workload packages, never from the API", "Secrets": "for workload packages, never from the API"}
	return []conversion{
		// A profile view holds the whole profile config, most of which is
		// not shown: only the answer's side is checked.
		conv("profile", func(v *control.ProfileView) api.Profile { return Profile(*v) }).
			prepared(func(src any) { src.(*control.ProfileView).ImagePresent = false }), // build_command is shown only then
		conv("diff", Diff).mirrored(nil),
		conv("patch result", PatchResult).mirrored(nil),
		conv("image build", ImageBuild).mirrored(map[string]string{
			"Name": "the image's (an image's name, a profile's image)", "Ref": "the image's", "PID": "the building process: the service's own business"}),
		conv("image", func(v *control.ImageView) api.Image { return Image(*v) }).
			prepared(func(src any) { src.(*control.ImageView).Present = false }), // build_command is shown only then
		conv("sandbox", Sandbox).mirrored(map[string]string{
			"ContainerID": "the driver's handle, never shown", "Instance": "the service replica that owns it, the service's own business",
			"Suspension.SnapshotID": "the service's own snapshot a hibernated sandbox wakes from, never shown",
			"Pool":                  "the warm pool a member belongs to, the service's own business (GET /v1/pools counts them)",
		}).leaving(map[string]string{"Endpoints": "getSandbox adds them from the profile", "Services": "getSandbox adds them from jobs.Services",
			"MemoryRestored": "Made and the resume and rollback answers add it", "SessionsFromSnapshot": "Made adds it"}),
		conv("sandbox made from a snapshot", Made).mirrored(map[string]string{
			"Sandbox.ContainerID": "as sandbox", "Sandbox.Instance": "as sandbox", "Sandbox.Suspension.SnapshotID": "as sandbox", "Sandbox.Pool": "as sandbox",
			"Err": "a copy that failed is an error of the fork, not a sandbox"}).
			leaving(map[string]string{"Endpoints": "as sandbox", "Services": "as sandbox"}),
		conv("snapshot", Snapshot).mirrored(map[string]string{"Tenant": caller,
			"Image":     "the image its sandbox ran: a sandbox made from it shows its own",
			"Internal":  "the service's own snapshots (a fork's, a hibernation's) are never listed",
			"Sessions":  "copied into each sandbox made from it (sessions_from_snapshot)",
			"UpdatedAt": "the record's bookkeeping"}),
		conv("job", Job).mirrored(map[string]string{"Tenant": caller}).leaving(map[string]string{"Artifacts": "jobWithArtifacts adds the artifact summary"}),
		conv("exec result", ExecResult).prepared(setExec).leaving(map[string]string{"Artifacts": "execResult adds the artifact summary"}),
		conv("lease", Lease).mirrored(map[string]string{"Tenant": caller}).leaving(map[string]string{
			"Sandbox": "acquireLease adds the leased sandbox", "MCPServers": "acquireLease adds the servers it started"}),
		conv("pools", func(v *control.PoolView) api.PoolList { return Pools([]control.PoolView{*v}, true) }).mirrored(nil),
		conv("network", Network).mirrored(map[string]string{"Tenant": caller}),
		conv("network summary", NetworkSummary).mirrored(nil),
		conv("network capabilities", func(v *control.NetworkCapability) api.NetworkCapabilities { return NetworkCapabilities(*v) }).mirrored(nil),
		conv("network events", func(v *control.NetworkEventsPage) api.NetworkEventList { return NetworkEvents(*v) }).mirrored(map[string]string{
			"Events.SandboxID": "the route's sandbox"}),
		conv("exit event", ExitEvent).mirrored(map[string]string{
			"Tenant": caller, "SandboxID": notInExit, "Command": notInExit, "Script": notInExit, "Cwd": notInExit, "TimeoutMS": notInExit,
			"Mode": notInExit, "CreatedAt": notInExit, "StartedAt": notInExit, "FinishedAt": notInExit,
		}).leaving(map[string]string{"DurationMS": "a record's exit event has none (the log's exit frame carries it)"}),
		conv("log exit", func(x *jobs.LogExit) api.ExitEvent { return LogExit(*x) }).mirrored(nil),
		conv("trace interruption", func(st *trace.Interruption) api.TraceInterruption { return Interruption(*st, []string{"job_1"}) }).mirrored(nil),
		conv("artifact", Artifact).mirrored(map[string]string{"Tenant": caller}),
		conv("artifact summary", ArtifactSummary).mirrored(map[string]string{
			"Spec.Paths": "listed by GET /v1/jobs/{id}/artifacts", "Spec.MaxFileBytes": "the request's caps", "Spec.MaxTotalBytes": "the request's caps",
			"Skipped.Path": "counted here, listed by GET /v1/jobs/{id}/artifacts", "Skipped.Size": "counted here", "Skipped.Reason": "counted here", "Skipped.Detail": "counted here",
			"JobID": "the job's own", "SandboxID": "the job's own", "Tenant": caller,
			"CreatedAt": collectionTimes, "FinishedAt": collectionTimes, "ExpiresAt": collectionTimes}),
		conv("artifact list", func(v *sandbox.ArtifactCollection) api.ArtifactList {
			var a sandbox.Artifact
			fill(reflect.ValueOf(&a).Elem(), "")
			return ArtifactList("job_1", v, []*sandbox.Artifact{&a})
		}).mirrored(map[string]string{
			"Spec.MaxFileBytes": "the request's caps", "Spec.MaxTotalBytes": "the request's caps", "Collected": "the summary's (on the job)",
			"CollectedBytes": "the summary's (on the job)", "JobID": "the route's", "SandboxID": "the job's own", "Tenant": caller,
			"CreatedAt": collectionTimes, "FinishedAt": collectionTimes, "ExpiresAt": collectionTimes}),
		conv("recording", Recording).mirrored(nil),
		conv("session", Session).mirrored(map[string]string{"Tenant": caller,
			"Cwd": "the shell's saved state, which the service carries from one exec to the next", "Env": "the shell's saved state",
			"KernelJobID": "a context's kernel job, the service's own"}),
		conv("tenant", Tenant).mirrored(nil).leaving(map[string]string{"Usage": "listTenants and getTenant add it"}),
		conv("usage", func(u *tenant.Usage) *api.Usage { return Usage(*u) }).mirrored(nil),
		conv("key", Key).mirrored(map[string]string{"Hash": "the secret's digest, never shown"}).
			leaving(map[string]string{"Key": "the secret: createKey adds it to its own answer"}),
		conv("audit record", AuditRecord).mirrored(nil),
		conv("audit page", func(a *tenant.AuditRecord) api.AuditPage { return AuditPage([]*tenant.AuditRecord{a}, 1, 0) }).
			mirrored(nil).leaving(map[string]string{"HasMore": "true only when the store answered more than the page holds"}),
		conv("tenant view", TenantView).mirrored(nil),
		conv("tenant list", func(v *tenancy.TenantView) api.TenantList { return TenantList([]*tenancy.TenantView{v}) }).mirrored(nil),
		conv("keys", func(k *tenant.Key) api.APIKeyList { return Keys([]*tenant.Key{k}) }).
			mirrored(map[string]string{"Hash": "the secret's digest, never shown"}).
			leaving(map[string]string{"Items.Key": "the secret: only createKey's answer holds it"}),
		conv("trace event", func(e *trace.Event) api.TraceEvent { return TraceEvent(*e) }).mirrored(nil),
		conv("images", func(v *control.ImageView) api.ImageList { return Images([]control.ImageView{*v}) }).
			prepared(func(src any) { src.(*control.ImageView).Present = false }),
		conv("browser downloads", func(d *browser.Download) api.BrowserDownloadList { return BrowserDownloads([]browser.Download{*d}) }).
			mirrored(map[string]string{"Artifact.Tenant": caller}),
		conv("whoami", func(p *tenant.Principal) api.Whoami { return Whoami(*p) }).mirrored(map[string]string{
			"KeyTenant": "the key's own tenant when an admin acts for Tenant: not part of the answer"}),
		conv("service", func(st *jobs.ServiceState) api.ServiceStatus { return ServiceStatus(*st) }).mirrored(nil),
		conv("disk quota", func(dq *control.DiskQuotaStatus) api.Feature { return DiskQuota(*dq) }).mirrored(nil),
		conv("run code", RunCode).mirrored(map[string]string{ // a run answers its job's id and output; GET /v1/jobs/{id} the rest
			"Exec.Job.SandboxID": "", "Exec.Job.Tenant": "", "Exec.Job.State": "", "Exec.Job.Command": "", "Exec.Job.Script": "",
			"Exec.Job.Cwd": "", "Exec.Job.ExitCode": "", "Exec.Job.ExitReason": "", "Exec.Job.Signal": "", "Exec.Job.Error": "",
			"Exec.Job.StdoutBytes": "", "Exec.Job.StderrBytes": "", "Exec.Job.StdoutTruncated": "", "Exec.Job.StderrTruncated": "",
			"Exec.Job.TimeoutMS": "", "Exec.Job.Mode": "", "Exec.Job.CreatedAt": "", "Exec.Job.StartedAt": "", "Exec.Job.FinishedAt": "",
		}),
		conv("browser status", func(st *browser.Status) api.BrowserStatus {
			return BrowserStatus(st, "http://x/v1/sandboxes/s/browser")
		}).
			mirrored(map[string]string{"CDPPort": "behind CDPURL"}),
		conv("browser actions", BrowserActions).mirrored(map[string]string{"Results.Artifact.Tenant": caller}),
		conv("browser download", func(d *browser.Download) api.BrowserDownload { return BrowserDownload(*d) }).
			mirrored(map[string]string{"Artifact.Tenant": caller}),
		conv("browser profile", BrowserProfile).mirrored(map[string]string{"Artifact.Tenant": caller}),
		conv("mcp server", MCPServer).mirrored(nil),
		conv("skill revision", SkillRevision).mirrored(nil),
		conv("skill run", SkillRun).mirrored(map[string]string{"Artifacts.Tenant": caller}),
		conv("skill run request", func(req *api.SkillRunRequest) skills.RunRequest { return SkillRunIn(*req) }).mirrored(nil),
		conv("mcp pin", func(p *mcp.Pin) api.MCPPin { return MCPPin(*p) }).mirrored(nil),
		conv("mcp approval", MCPApproval).mirrored(nil),
		conv("mcp catalog entry", MCPCatalogEntry).mirrored(nil),
		conv("file list", func(l *files.FileList) api.FileList { return FileList(*l) }).mirrored(nil),
		conv("search result", func(r *files.SearchResult) api.SearchResult { return Search(*r) }).mirrored(nil),
		conv("replace result", func(r *files.ReplaceResult) api.ReplaceResult { return Replace(*r) }).mirrored(nil),

		// Wire → domain: every field of the body reaches the call.
		conv("create sandbox", func(req *api.CreateSandboxRequest) control.CreateSandboxInput {
			return CreateSandboxInput("t", "key", *req)
		}).mirrored(map[string]string{"SnapshotID": fromSnapshot}).leaving(map[string]string{
			"ReadOnlyDirs": "for workload packages, never from the API", "Reserved": "for workload packages, never from the API",
			"From": "for workload packages (snapshots), never from the API"}),
		conv("acquire lease", func(req *api.AcquireLeaseRequest) control.AcquireLeaseInput { return AcquireLeaseInput("t", *req) }).
			mirrored(map[string]string{"MCP": "MCPCreateIn, one by one (leaseMCPRequests)", "SnapshotID": fromSnapshot}).
			leaving(map[string]string{"Reserved": "for workload packages, never from the API",
				"From":  "for workload packages (snapshots), never from the API",
				"Audit": "the edge's audit record of the request, written in the claim's transaction; never from the API"}),
		conv("fork", func(req *api.ForkRequest) control.CreateSandboxInput { return ForkInput(*req) }).
			mirrored(map[string]string{"Count": "the fork's own argument"}).partOf(), // the rest of each copy is the sandbox's
		conv("exec", exec).prepared(func(src any) { src.(*api.ExecRequest).StdinBase64 = "" }).
			mirrored(map[string]string{"Background": background, "StdinBase64": "exclusive with stdin: the case below"}).
			leaving(execUnset),
		conv("exec with stdin_base64", exec).prepared(func(src any) {
			req := src.(*api.ExecRequest)
			req.Stdin, req.StdinBase64 = "", "aGk="
		}).mirrored(map[string]string{"Background": background, "Stdin": "exclusive with stdin_base64: the case above"}).
			leaving(execUnset),
		conv("artifact request", ArtifactSpec).mirrored(nil),
		conv("create tenant", func(req *api.CreateTenantRequest) tenancy.TenantInput { return TenantInput(*req) }).mirrored(nil),
		conv("update tenant", func(req *api.UpdateTenantRequest) tenancy.TenantPatch { return TenantPatch(*req) }).mirrored(nil),
		conv("mcp create", func(req *api.MCPCreateRequest) servers.CreateRequest { return MCPCreateIn(*req) }).mirrored(nil).
			leaving(map[string]string{"CreatedBy": "the caller's key: the handler sets it, never the body"}),
		conv("network policy", PolicyIn).mirrored(nil),
	}
}

// listed reports whether path or a field above it is a key of m.
func listed(m map[string]string, path string) bool {
	for {
		if _, ok := m[path]; ok {
			return true
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			return false
		}
		path = path[:i]
	}
}

// TestWireConversions checks every conversion of wire.go both ways.
func TestWireConversions(t *testing.T) {
	t.Parallel()
	for _, c := range wireConversions() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := reflect.ValueOf(c.convert(c.source()))
			for _, z := range zeros(out, "") {
				if c.part {
					break
				}
				if !listed(c.unset, z) {
					t.Errorf("%s: the answer's %s stays zero though every field of %s is set: carry it in wire.go (or list it in unset, with why)", c.name, z, c.from)
				}
			}
			if !c.mirror {
				return
			}
			base := out.Interface()
			for _, leaf := range leaves(c.from, "") {
				if listed(c.dropped, leaf) {
					continue
				}
				src := c.source()
				zeroAt(reflect.ValueOf(src), strings.Split(leaf, "."))
				if reflect.DeepEqual(c.convert(src), base) {
					t.Errorf("%s: %s.%s does not reach the answer: carry it in wire.go (or list it in dropped, with why)", c.name, c.from, leaf)
				}
			}
		})
	}
}

// TestWireRoundTrips checks the conversions that have both directions:
// a wire value goes to the domain and back unchanged.
func TestWireRoundTrips(t *testing.T) {
	t.Parallel()
	var pol api.NetworkPolicy
	fill(reflect.ValueOf(&pol).Elem(), "")
	if back := PolicyOut(*PolicyIn(&pol)); !reflect.DeepEqual(back, pol) {
		t.Errorf("network policy: %+v came back as %+v", pol, back)
	}
	var res api.Resources
	fill(reflect.ValueOf(&res).Elem(), "")
	if back := Resources(ResourcesIn(&res)); back != res {
		t.Errorf("resources: %+v came back as %+v", res, back)
	}
	var in servers.Instance
	fill(reflect.ValueOf(&in).Elem(), "")
	in.Server = &sdk.Implementation{Name: "n", Version: "1", Icons: []sdk.Icon{{Source: "https://example.com/i.png", MIMEType: "image/png"}}}
	w := MCPServer(&in)
	want, _ := json.Marshal(in.Server)
	got, _ := json.Marshal(w.Server)
	if string(got) != string(want) {
		t.Errorf("mcp server implementation: %s, want %s", got, want)
	}
}

// TestWireCheckerCatches feeds the checker conversions that drop a field
// or leave one unset, so that TestWireConversions can fail.
func TestWireCheckerCatches(t *testing.T) {
	t.Parallel()
	type inner struct {
		Mode string
		N    int
	}
	type domain struct {
		A string
		B *inner
		C []string
	}
	type wire struct {
		A, B, C string
	}
	complete := conv("complete", func(d *domain) wire { return wire{A: d.A, B: d.B.Mode + strconv.Itoa(d.B.N), C: d.C[0]} }).mirrored(nil)
	dropsC := conv("drops C", func(d *domain) wire { return wire{A: d.A, B: d.B.Mode + strconv.Itoa(d.B.N), C: "fixed"} }).mirrored(nil)
	leavesB := conv("leaves B", func(d *domain) wire { return wire{A: d.A, C: d.C[0] + d.B.Mode + strconv.Itoa(d.B.N)} }).mirrored(nil)
	check := func(c conversion) (unset, dropped []string) {
		out := reflect.ValueOf(c.convert(c.source()))
		unset = zeros(out, "")
		for _, leaf := range leaves(c.from, "") {
			src := c.source()
			zeroAt(reflect.ValueOf(src), strings.Split(leaf, "."))
			if reflect.DeepEqual(c.convert(src), out.Interface()) {
				dropped = append(dropped, leaf)
			}
		}
		return unset, dropped
	}
	if u, d := check(complete); len(u)+len(d) != 0 {
		t.Errorf("complete conversion: unset %q, dropped %q", u, d)
	}
	if _, d := check(dropsC); !slices.Contains(d, "C") {
		t.Errorf("a conversion that drops C: dropped %q", d)
	}
	if u, _ := check(leavesB); !slices.Equal(u, []string{"B"}) {
		t.Errorf("a conversion that leaves B unset: unset %q", u)
	}
	got := leaves(reflect.TypeFor[domain](), "")
	sort.Strings(got)
	if want := []string{"A", "B.Mode", "B.N", "C"}; !slices.Equal(got, want) {
		t.Errorf("leaves = %q, want %q", got, want)
	}
}
