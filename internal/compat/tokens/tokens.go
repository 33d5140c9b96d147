// Package tokens makes and checks the per-sandbox data-plane tokens the
// compatibility adapters (E2B, OpenSandbox) hand out: the E2B access and
// traffic token, the OpenSandbox execd token.
//
// A token is "gst_v2.<payload>.<mac>": the payload is base64url JSON naming
// the sandbox, its tenant and the API key the token was asked for with;
// the MAC is HMAC-SHA256 over "gst_v2." + payload under the service's
// token key (a file of the data dir, so tokens survive a restart). A token
// opens one sandbox only. It has no expiry of its own: it dies with the
// sandbox (ids are never reused, and every call looks the sandbox up) and
// with its key, which the adapters check at every use (tenancy.KeyLive).
// Tokens of the earlier format ("gst_" and the tenant, no key) are
// ErrOutdated.
//
// Import rule (internal/layering): a leaf, the standard library only.
package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// prefix starts every token, so that one is recognisable in a log or a
// leaked file; version follows it.
const (
	prefix  = "gst_"
	version = "v2"
	head    = prefix + version + "."
)

// maxTokenBytes bounds a token read from a request.
const maxTokenBytes = 1024

// Errors of Check.
var (
	// ErrInvalid: not a token of this signer for this sandbox (missing,
	// malformed, forged, or another sandbox's).
	ErrInvalid = errors.New("not a valid token for this sandbox")
	// ErrOutdated: a token of the earlier format, which named no API key;
	// the client must ask for a new one.
	ErrOutdated = errors.New("a token of an earlier format, which names no API key")
)

// Claims are what a token says.
type Claims struct {
	Tenant    string `json:"t"`
	SandboxID string `json:"s"`
	// KeyID is the API key the token was asked for with; KeyTenant that
	// key's tenant when it is not Tenant.
	KeyID     string `json:"i"`
	KeyTenant string `json:"a,omitempty"`
}

// IssuerTenant is the tenant of the key the token was asked for with.
func (c Claims) IssuerTenant() string {
	if c.KeyTenant != "" {
		return c.KeyTenant
	}
	return c.Tenant
}

// Signer makes and checks tokens under one key.
type Signer struct{ key []byte }

// New returns a Signer with a fresh random key (its tokens end with it).
func New() (*Signer, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("token key: %w", err)
	}
	return &Signer{key: key}, nil
}

// WithKey returns a Signer with key.
func WithKey(key []byte) *Signer { return &Signer{key: key} }

// Sign is the token of c.
func (s *Signer) Sign(c Claims) string {
	if c.KeyTenant == c.Tenant {
		c.KeyTenant = ""
	}
	b, _ := json.Marshal(c)
	payload := head + base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Check answers the claims of a valid token of sandboxID: ErrInvalid or
// ErrOutdated otherwise. Whether its key is still live is the caller's
// check.
func (s *Signer) Check(token, sandboxID string) (Claims, error) {
	if len(token) > maxTokenBytes {
		return Claims{}, ErrInvalid
	}
	rest, ok := strings.CutPrefix(token, head)
	if !ok {
		if strings.HasPrefix(token, prefix) && strings.Count(token, ".") == 1 {
			return Claims{}, ErrOutdated
		}
		return Claims{}, ErrInvalid
	}
	body, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return Claims{}, ErrInvalid
	}
	sum, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(sum, s.mac(head+body)) {
		return Claims{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil || c.Tenant == "" || c.KeyID == "" || c.SandboxID != sandboxID {
		return Claims{}, ErrInvalid
	}
	return c, nil
}
