package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestVolumeTenantQuota: a tenant's volume disk quota (max_volume_mb,
// max_volumes), set and changed through the tenants admin API, holds
// against parallel creates over HTTP (exactly as many as fit are made,
// the rest are 429 quota_exceeded and leave nothing), shows in the
// tenant's usage, narrows but never widens the service's
// volumes.max_mb_per_tenant, and each volume reports the bytes its
// filesystem holds.
func TestVolumeTenantQuota(t *testing.T) {
	t.Parallel()
	adminKey := "admin_" + randomHex(t, 16)
	e := newEnv(t, fmt.Sprintf("admin_api_key: %q\nvolumes: {max_mb_per_tenant: 40}\n", adminKey))
	svc := e.start(t)
	t.Cleanup(func() {
		for _, mp := range volumeMounts(t, e) {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := client.New(svc.url(), adminKey)
	if _, err := admin.CreateTenant(ctx, client.CreateTenantRequest{Name: "acme", Quotas: &client.Quotas{MaxVolumeMB: 24}}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateAPIKey(ctx, "acme", client.CreateAPIKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(svc.url(), k.Key)
	if _, err := c.ListVolumes(ctx); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotImplemented && os.Getenv("CI") != "true" {
			t.Skipf("volumes unavailable on this host: %v", err)
		}
		t.Fatal(err)
	}

	// Eight parallel creates of 8 MiB under a quota of 24: three are made.
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = c.CreateVolume(ctx, fmt.Sprintf("v%d", i), 8) })
	}
	wg.Wait()
	made := 0
	for i, err := range errs {
		var ae *client.APIError
		switch {
		case err == nil:
			made++
		case !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Problem.Code != "quota_exceeded":
			t.Errorf("create v%d: %v, want 429 quota_exceeded", i, err)
		}
	}
	list, err := c.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if made != 3 || len(list) != 3 {
		t.Fatalf("%d parallel creates of 8 MiB under max_volume_mb 24: %d made, %d listed; want 3", n, made, len(list))
	}
	for _, v := range list {
		if v.UsedBytes == nil || *v.UsedBytes <= 0 || *v.UsedBytes >= 8<<20 {
			t.Errorf("volume %s: used_bytes %v, want its filesystem's metadata, less than its size", v.Name, v.UsedBytes)
		}
	}
	tn, err := admin.GetTenant(ctx, "acme")
	if err != nil || tn.Usage == nil || tn.Usage.Volumes != 3 || tn.Usage.VolumeMB != 24 || tn.Quotas.MaxVolumeMB != 24 {
		t.Fatalf("the tenant's view: %+v %v, want 3 volumes of 24 MiB against max_volume_mb 24", tn, err)
	}

	// Used bytes follow what is written.
	name := list[0].Name
	before := *list[0].UsedBytes
	const blob = 2 << 20
	if _, err := c.WriteVolumeFile(ctx, name, "/blob", bytes.NewReader(bytes.Repeat([]byte{7}, blob)), client.WriteFileOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, err := c.GetVolume(ctx, name); err != nil || v.UsedBytes == nil || *v.UsedBytes-before < blob {
		t.Errorf("after writing %d bytes: %+v %v (was %d used)", blob, v, err, before)
	}

	// Raising the quota lets one more in; the service's 40 MiB stays the
	// ceiling above a larger tenant quota.
	mb := int64(32)
	if _, err := admin.UpdateTenant(ctx, "acme", client.UpdateTenantRequest{Quotas: &client.QuotasPatch{MaxVolumeMB: &mb}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateVolume(ctx, "more", 8); err != nil {
		t.Errorf("after raising max_volume_mb to 32: %v", err)
	}
	_, err = c.CreateVolume(ctx, "over", 1)
	apiStatus(t, "past the raised quota", err, 429, "quota_exceeded")
	mb = 1 << 20
	if _, err := admin.UpdateTenant(ctx, "acme", client.UpdateTenantRequest{Quotas: &client.QuotasPatch{MaxVolumeMB: &mb}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateVolume(ctx, "fits", 8); err != nil {
		t.Errorf("40 MiB in all under the service's limit: %v", err)
	}
	_, err = c.CreateVolume(ctx, "ceiling", 1)
	apiStatus(t, "past the service's limit under a larger tenant quota", err, 429, "quota_exceeded")
	neg := -1
	_, err = admin.UpdateTenant(ctx, "acme", client.UpdateTenantRequest{Quotas: &client.QuotasPatch{MaxVolumes: &neg}}, "")
	apiStatus(t, "a negative max_volumes", err, 400, "invalid_argument")

	all, err := c.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if err := c.DeleteVolume(ctx, v.Name); err != nil {
			t.Errorf("delete %s: %v", v.Name, err)
		}
	}
	if left := volumeMounts(t, e); len(left) > 0 {
		t.Errorf("mounted after every delete: %v", left)
	}
}
