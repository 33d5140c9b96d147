package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

// testSkills checks skill revisions: numbering, idempotent pushes of the
// same content, archives kept once per digest, tenant isolation, listing
// and concurrent pushes of one skill.
func testSkills(t *testing.T, st store.Store) {
	ctx := context.Background()
	rev := func(tenant, name, digest string) *store.SkillRevision {
		return &store.SkillRevision{Tenant: tenant, Name: name, Digest: digest, CreatedAt: base, Doc: []byte(`{"d":"` + digest + `"}`)}
	}
	r1, created, err := st.CreateSkillRevision(ctx, rev("a", "pdf", "sha256:1"), []byte("one"))
	if err != nil || !created || r1.Revision != 1 {
		t.Fatalf("first revision: %+v %v %v", r1, created, err)
	}
	again, created, err := st.CreateSkillRevision(ctx, rev("a", "pdf", "sha256:1"), []byte("one"))
	if err != nil || created || again.Revision != 1 {
		t.Fatalf("same content again: %+v %v %v", again, created, err)
	}
	r2, created, err := st.CreateSkillRevision(ctx, rev("a", "pdf", "sha256:2"), []byte("two"))
	if err != nil || !created || r2.Revision != 2 {
		t.Fatalf("second revision: %+v %v %v", r2, created, err)
	}
	// Back to the first content: a new revision (only the latest is compared).
	r3, created, err := st.CreateSkillRevision(ctx, rev("a", "pdf", "sha256:1"), []byte("one"))
	if err != nil || !created || r3.Revision != 3 {
		t.Fatalf("third revision: %+v %v %v", r3, created, err)
	}
	if _, _, err := st.CreateSkillRevision(ctx, rev("b", "pdf", "sha256:9"), []byte("nine")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateSkillRevision(ctx, rev("a", "csv", "sha256:3"), []byte("three")); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetSkillRevision(ctx, "a", "pdf", 0)
	var doc struct{ D string }
	if err != nil || got.Revision != 3 || got.Digest != "sha256:1" || json.Unmarshal(got.Doc, &doc) != nil || doc.D != "sha256:1" || !got.CreatedAt.Equal(base) {
		t.Fatalf("latest: %+v %v", got, err)
	}
	if got, err := st.GetSkillRevision(ctx, "a", "pdf", 2); err != nil || got.Digest != "sha256:2" {
		t.Fatalf("revision 2: %+v %v", got, err)
	}
	for _, c := range []struct {
		tenant, name string
		rev          int64
	}{{"a", "pdf", 4}, {"b", "csv", 0}, {"c", "pdf", 1}} {
		if _, err := st.GetSkillRevision(ctx, c.tenant, c.name, c.rev); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("GetSkillRevision(%s, %s, %d) = %v, want not found", c.tenant, c.name, c.rev, err)
		}
	}
	list, err := st.ListSkills(ctx, "a")
	if err != nil || len(list) != 2 || list[0].Name != "csv" || list[1].Name != "pdf" || list[1].Revision != 3 {
		t.Fatalf("ListSkills(a) = %+v %v", list, err)
	}
	revs, err := st.ListSkillRevisions(ctx, "a", "pdf")
	if err != nil || len(revs) != 3 || revs[0].Revision != 3 || revs[2].Revision != 1 {
		t.Fatalf("ListSkillRevisions = %+v %v", revs, err)
	}
	if revs, _ := st.ListSkillRevisions(ctx, "b", "csv"); len(revs) != 0 {
		t.Errorf("another tenant's skill listed: %+v", revs)
	}
	if data, err := st.SkillArchive(ctx, "sha256:2"); err != nil || !bytes.Equal(data, []byte("two")) {
		t.Errorf("archive: %q %v", data, err)
	}
	if _, err := st.SkillArchive(ctx, "sha256:none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing archive: %v", err)
	}
	if _, _, err := st.CreateSkillRevision(ctx, &store.SkillRevision{Tenant: "a", Name: "x"}, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("incomplete revision: %v", err)
	}

	// Concurrent pushes of different contents get distinct revisions 1..n.
	const n = 8
	var wg sync.WaitGroup
	seen := make(chan int64, n)
	for i := range n {
		wg.Go(func() {
			d := fmt.Sprintf("sha256:c%d", i)
			r, created, err := st.CreateSkillRevision(ctx, &store.SkillRevision{Tenant: "a", Name: "busy", Digest: d,
				CreatedAt: base.Add(time.Duration(i)), Doc: []byte(`{}`)}, []byte(d))
			if err != nil || !created {
				t.Errorf("concurrent push %d: %v %v", i, created, err)
				return
			}
			seen <- r.Revision
		})
	}
	wg.Wait()
	close(seen)
	got2 := map[int64]bool{}
	for r := range seen {
		got2[r] = true
	}
	for r := int64(1); r <= n; r++ {
		if !got2[r] {
			t.Errorf("revisions of concurrent pushes %v, missing %d", got2, r)
		}
	}
}
