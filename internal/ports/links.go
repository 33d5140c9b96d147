package ports

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// A link's token is "v2.<payload>.<mac>": the payload is base64url JSON
// naming the tenant, sandbox, port (or scope), expiry and the API key the
// link was made with; the MAC is HMAC-SHA256 over "v2." + payload with the
// service's link key. The token proves that a caller holding that key
// asked for a link to that port; it carries no API key. It dies with its
// expiry, with the key (revoked, or its tenant deleted: Config.KeyLive is
// asked at every use) and with the sandbox: sandbox ids are never reused
// and every request through a link attaches to the sandbox again (so a
// stopped or deleted sandbox answers 404 or 409 at once). Tokens of the
// earlier format "v1" named no key: they are link_invalid.
const linkVersion = "v2"

// LinkClaims is what a link grants.
type LinkClaims struct {
	Tenant    string `json:"t"`
	SandboxID string `json:"s"`
	Port      int    `json:"p"`
	Expires   int64  `json:"e"` // unix seconds
	// Scope, when set, makes the token a link to another route of the
	// sandbox (such as "display:observer"); VerifyLink refuses it, so it
	// never opens a port.
	Scope string `json:"k,omitempty"`
	// KeyID is the API key the link was made with; KeyTenant that key's
	// tenant when it is not Tenant (an admin key acting for Tenant). The
	// link is refused once the key is.
	KeyID     string `json:"i"`
	KeyTenant string `json:"a,omitempty"`
}

// claimsBy fills in the key of the principal a link is made by.
func claimsBy(by tenant.Principal, c LinkClaims) LinkClaims {
	c.Tenant, c.KeyID = by.Tenant, by.KeyID
	if by.KeyTenant != "" && by.KeyTenant != by.Tenant {
		c.KeyTenant = by.KeyTenant
	}
	return c
}

// IssuerTenant is the tenant of the key the link was made with.
func (c LinkClaims) IssuerTenant() string {
	if c.KeyTenant != "" {
		return c.KeyTenant
	}
	return c.Tenant
}

// Signer makes and checks link tokens.
type Signer struct {
	key []byte
}

// MinLinkKeyBytes is the shortest link key accepted.
const MinLinkKeyBytes = 32

// NewSigner returns a signer with key (at least MinLinkKeyBytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < MinLinkKeyBytes {
		return nil, errdefs.Invalid("ports: link key of %d bytes, want at least %d", len(key), MinLinkKeyBytes)
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// LoadOrCreateKey reads the link key at path, or makes a random one there
// (mode 0600) when the file does not exist.
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k := []byte(strings.TrimSpace(string(b)))
		if len(k) < MinLinkKeyBytes {
			return nil, errdefs.Invalid("ports: link key file %s holds %d bytes, want at least %d", path, len(k), MinLinkKeyBytes)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ports: read link key: %v: %w", err, errdefs.ErrUnavailable)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("ports: make link key: %v: %w", err, errdefs.ErrInternal)
	}
	k := []byte(base64.RawURLEncoding.EncodeToString(raw[:]))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ports: link key dir: %v: %w", err, errdefs.ErrUnavailable)
	}
	// O_EXCL: when two processes race, one writes and the other reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("ports: write link key: %v: %w", err, errdefs.ErrUnavailable)
	}
	_, werr := f.Write(append(k, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, fmt.Errorf("ports: write link key: %v: %w", werr, errdefs.ErrUnavailable)
	}
	return k, nil
}

// Sign returns the token for c.
func (s *Signer) Sign(c LinkClaims) string {
	b, _ := json.Marshal(c)
	payload := linkVersion + "." + base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// maxTokenBytes bounds a token read from a URL.
const maxTokenBytes = 1024

// Verify checks token's format, MAC and expiry at now and returns its
// claims; whether its key is still live is the Proxy's check. Every
// failure is the same not-found class (code link_invalid or link_expired),
// so a probe learns nothing about which sandboxes exist.
func (s *Signer) Verify(token string, now time.Time) (LinkClaims, error) {
	invalid := errdefs.WithCode("link_invalid", fmt.Errorf("preview link is not valid: %w", errdefs.ErrNotFound))
	if len(token) > maxTokenBytes {
		return LinkClaims{}, invalid
	}
	ver, rest, ok := strings.Cut(token, ".")
	if !ok || ver != linkVersion {
		return LinkClaims{}, invalid
	}
	body, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return LinkClaims{}, invalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(ver+"."+body)) {
		return LinkClaims{}, invalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return LinkClaims{}, invalid
	}
	var c LinkClaims
	if err := json.Unmarshal(raw, &c); err != nil || c.SandboxID == "" || c.Tenant == "" || c.KeyID == "" {
		return LinkClaims{}, invalid
	}
	if now.Unix() >= c.Expires {
		return LinkClaims{}, errdefs.WithCode("link_expired", fmt.Errorf("preview link expired at %s: %w",
			time.Unix(c.Expires, 0).UTC().Format(time.RFC3339), errdefs.ErrNotFound))
	}
	return c, nil
}
