package tokens

import (
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	a := WithKey([]byte("0123456789abcdef0123456789abcdef"))
	tok := a.Sign("tenant-a", "sbx_1")
	if ten, ok := a.Check(tok, "sbx_1"); !ok || ten != "tenant-a" {
		t.Fatalf("own token refused: %q %v", ten, ok)
	}
	other := WithKey([]byte("another secret of thirty-two by."))
	for name, bad := range map[string]struct{ token, id string }{
		"another sandbox":          {tok, "sbx_2"},
		"another tenant spliced":   {strings.Replace(tok, tok[4:strings.Index(tok, ".")], "dGVuYW50LWI", 1), "sbx_1"},
		"another service's secret": {other.Sign("tenant-a", "sbx_1"), "sbx_1"},
		"empty":                    {"", "sbx_1"},
		"no prefix":                {strings.TrimPrefix(tok, "gst_"), "sbx_1"},
		"truncated":                {tok[:len(tok)-2], "sbx_1"},
	} {
		if ten, ok := a.Check(bad.token, bad.id); ok {
			t.Errorf("%s: token accepted (tenant %q)", name, ten)
		}
	}
	fresh, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh.Check(tok, "sbx_1"); ok {
		t.Error("a token of another key was accepted by a fresh signer")
	}
}
