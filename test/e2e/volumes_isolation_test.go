package e2e

import (
	"io"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// crossTenantVolumes walks every documented route of a named volume with
// another tenant's key: the owner's volume answers it exactly as a name the
// other tenant has no volume of (404, or the idempotent 204 of a delete),
// nothing of the owner's file leaks, and the owner's volume and file are
// as they were afterwards.
func crossTenantVolumes(t *testing.T, svc *service, otherKey string, routes []string) {
	owner := svc.client()
	const name, missing = "owners-isolated", "nobody-has-this-volume"
	if _, err := owner.CreateVolume(callCtx(t), name, 16); err != nil {
		t.Fatalf("the owner's volume: %v", err)
	}
	t.Cleanup(func() {
		if err := owner.DeleteVolume(callCtx(t), name); err != nil {
			t.Errorf("deleting the owner's volume: %v", err)
		}
	})
	if _, err := owner.WriteVolumeFile(callCtx(t), name, "secret.txt", strings.NewReader("s3cret\n"), client.WriteFileOptions{}); err != nil {
		t.Fatalf("the owner's file: %v", err)
	}
	bodies := map[string]string{ // callRaw adds path=secret.txt to each
		"GET /v1/volumes/{name}":               "",
		"DELETE /v1/volumes/{name}":            "",
		"PUT /v1/volumes/{name}/files":         "pwned",
		"GET /v1/volumes/{name}/files":         "",
		"GET /v1/volumes/{name}/files/stat":    "",
		"GET /v1/volumes/{name}/files/list":    "",
		"POST /v1/volumes/{name}/files/delete": `{"path":"secret.txt"}`,
	}
	walked := 0
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		if !strings.HasPrefix(path, "/v1/volumes/") {
			continue
		}
		body, known := bodies[route]
		if !known {
			t.Errorf("%s names a volume route this walk does not know: add it", route)
			continue
		}
		walked++
		foreign := callRaw(t, svc, otherKey, method, strings.Replace(path, "{name}", name, 1), body)
		miss := callRaw(t, svc, otherKey, method, strings.Replace(path, "{name}", missing, 1), body)
		want := 404
		if route == "DELETE /v1/volumes/{name}" {
			want = 204 // idempotent: deleting a volume the tenant does not have succeeds
		}
		if foreign.status != want || foreign.status != miss.status || foreign.code != miss.code {
			t.Errorf("%s with another tenant's key: %d %s %q; for a missing name: %d %s; want the same %d",
				route, foreign.status, foreign.code, foreign.detail, miss.status, miss.code, want)
		}
		if strings.Contains(foreign.detail, "s3cret") {
			t.Errorf("%s leaks file content: %s", route, foreign.detail)
		}
	}
	if walked < len(bodies) {
		t.Errorf("walked %d of the %d volume routes this walk knows: the document lost some", walked, len(bodies))
	}
	// The other tenant's list does not show it; the owner's volume and file
	// are as they were.
	other := client.New(svc.url(), otherKey)
	vols, err := other.ListVolumes(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		if v.Name == name {
			t.Errorf("the other tenant's list shows the owner's volume: %+v", v)
		}
	}
	d, err := owner.ReadVolumeFile(callCtx(t), name, "secret.txt", nil)
	if err != nil {
		t.Fatalf("the owner's file after the walk: %v", err)
	}
	defer d.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, d.Body); err != nil || b.String() != "s3cret\n" {
		t.Errorf("the owner's file after the walk: %q %v", b.String(), err)
	}
}
