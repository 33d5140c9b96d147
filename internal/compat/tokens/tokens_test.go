package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	a := WithKey([]byte("0123456789abcdef0123456789abcdef"))
	claims := Claims{Tenant: "tenant-a", SandboxID: "sbx_1", KeyID: "key_1"}
	tok := a.Sign(claims)
	if !strings.HasPrefix(tok, "gst_v2.") {
		t.Fatalf("token %q does not say its format", tok)
	}
	got, err := a.Check(tok, "sbx_1")
	if err != nil || got != claims || got.IssuerTenant() != "tenant-a" {
		t.Fatalf("own token: %+v %v", got, err)
	}
	// An admin key acting for the tenant: the key's tenant is named.
	admin := a.Sign(Claims{Tenant: "tenant-a", SandboxID: "sbx_1", KeyID: "key_2", KeyTenant: "admin"})
	if got, err := a.Check(admin, "sbx_1"); err != nil || got.IssuerTenant() != "admin" || got.Tenant != "tenant-a" {
		t.Fatalf("an admin's token: %+v %v", got, err)
	}

	other := WithKey([]byte("another secret of thirty-two by."))
	body := strings.Split(tok, ".")[1]
	spliced := strings.Replace(tok, body, base64.RawURLEncoding.EncodeToString([]byte(`{"t":"tenant-b","s":"sbx_1","i":"key_1"}`)), 1)
	// A token of the earlier format: "gst_" + tenant + "." + HMAC(tenant,
	// sandbox) under the same key.
	m := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
	m.Write([]byte("tenant-a\x00sbx_1"))
	old := "gst_" + base64.RawURLEncoding.EncodeToString([]byte("tenant-a")) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	// A well-signed payload that names no key.
	noKey := func() string {
		p := head + base64.RawURLEncoding.EncodeToString([]byte(`{"t":"tenant-a","s":"sbx_1"}`))
		return p + "." + base64.RawURLEncoding.EncodeToString(a.mac(p))
	}()
	for name, bad := range map[string]struct {
		token, id string
		want      error
	}{
		"another sandbox":          {tok, "sbx_2", ErrInvalid},
		"another tenant spliced":   {spliced, "sbx_1", ErrInvalid},
		"another service's secret": {other.Sign(claims), "sbx_1", ErrInvalid},
		"empty":                    {"", "sbx_1", ErrInvalid},
		"no prefix":                {strings.TrimPrefix(tok, "gst_"), "sbx_1", ErrInvalid},
		"truncated":                {tok[:len(tok)-2], "sbx_1", ErrInvalid},
		"no key named":             {noKey, "sbx_1", ErrInvalid},
		"too long":                 {tok + strings.Repeat("A", 2000), "sbx_1", ErrInvalid},
		"the earlier format":       {old, "sbx_1", ErrOutdated},
	} {
		if got, err := a.Check(bad.token, bad.id); !errors.Is(err, bad.want) {
			t.Errorf("%s: %+v %v, want %v", name, got, err, bad.want)
		}
	}
	fresh, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Check(tok, "sbx_1"); err == nil {
		t.Error("a token of another key was accepted by a fresh signer")
	}
}

func FuzzCheck(f *testing.F) {
	a := WithKey([]byte("0123456789abcdef0123456789abcdef"))
	f.Add(a.Sign(Claims{Tenant: "t", SandboxID: "sbx_1", KeyID: "key_1"}), "sbx_1")
	f.Add("gst_dA.AAAA", "sbx_1")
	f.Add("gst_v2..", "")
	f.Fuzz(func(t *testing.T, token, id string) {
		c, err := a.Check(token, id)
		if err == nil && (c.SandboxID != id || c.KeyID == "" || a.Sign(c) != token) {
			// A token Check accepts is exactly one Sign made.
			t.Fatalf("accepted %q for %q as %+v", token, id, c)
		}
	})
}
