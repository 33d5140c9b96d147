// Package tokens makes and checks the per-sandbox data-plane tokens the
// compatibility adapters (E2B, OpenSandbox) hand out at create: the tenant
// and an HMAC of (tenant, sandbox id) under a key made at start. A token
// opens one sandbox only; deleting the sandbox revokes it, since every call
// then finds no sandbox; it does not outlive the process that made it.
//
// Import rule (internal/layering): a leaf, the standard library only.
package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// prefix starts every token, so that one is recognisable in a log or a
// leaked file.
const prefix = "gst_"

// Signer makes and checks tokens under one key.
type Signer struct{ key []byte }

// New returns a Signer with a fresh random key.
func New() (*Signer, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	return &Signer{key: key}, nil
}

// WithKey returns a Signer with key (tests).
func WithKey(key []byte) *Signer { return &Signer{key: key} }

// Sign is the token of tenant's sandbox.
func (s *Signer) Sign(tenant, sandboxID string) string {
	return prefix + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "." +
		base64.RawURLEncoding.EncodeToString(s.mac(tenant, sandboxID))
}

func (s *Signer) mac(tenant, sandboxID string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(tenant))
	m.Write([]byte{0})
	m.Write([]byte(sandboxID))
	return m.Sum(nil)
}

// Check answers the tenant of a valid token of sandboxID.
func (s *Signer) Check(token, sandboxID string) (string, bool) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return "", false
	}
	t64, m64, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	tenant, err1 := base64.RawURLEncoding.DecodeString(t64)
	sum, err2 := base64.RawURLEncoding.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sum, s.mac(string(tenant), sandboxID)) {
		return "", false
	}
	return string(tenant), true
}
