package tenant

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Source says where a tenant is defined.
type Source string

// Tenant sources. Config tenants are rewritten from the config file at every
// start and cannot be changed or deleted through the API; API tenants live
// only in the store.
const (
	SourceConfig Source = "config"
	SourceAPI    Source = "api"
)

// Quotas bound what one tenant may hold at once. Zero means unlimited.
type Quotas struct {
	MaxSandboxes int     `json:"max_sandboxes" yaml:"max_sandboxes"`
	MaxCPU       float64 `json:"max_cpu" yaml:"max_cpu"`
	MaxMemoryMB  int64   `json:"max_memory_mb" yaml:"max_memory_mb"`
	MaxLeases    int     `json:"max_leases" yaml:"max_leases"`
	// MaxVolumes bounds the tenant's named volumes and MaxVolumeMB their
	// summed size_mb (its volume disk quota). The config's volumes.
	// max_per_tenant and volumes.max_mb_per_tenant stay the ceiling: the
	// tighter of the two holds (VolumeLimits).
	MaxVolumes  int   `json:"max_volumes" yaml:"max_volumes"`
	MaxVolumeMB int64 `json:"max_volume_mb" yaml:"max_volume_mb"`
}

// Validate refuses negative quotas, naming the offending key under prefix
// (for example "tenants.acme.quotas").
func (q Quotas) Validate(prefix string) error {
	bad := func(key string, v any) error {
		return errdefs.Invalid("%s.%s must not be negative, got %v", prefix, key, v)
	}
	switch {
	case q.MaxSandboxes < 0:
		return bad("max_sandboxes", q.MaxSandboxes)
	case q.MaxCPU < 0:
		return bad("max_cpu", q.MaxCPU)
	case q.MaxMemoryMB < 0:
		return bad("max_memory_mb", q.MaxMemoryMB)
	case q.MaxLeases < 0:
		return bad("max_leases", q.MaxLeases)
	case q.MaxVolumes < 0:
		return bad("max_volumes", q.MaxVolumes)
	case q.MaxVolumeMB < 0:
		return bad("max_volume_mb", q.MaxVolumeMB)
	}
	return nil
}

// Usage is what a tenant holds now.
type Usage struct {
	Sandboxes int     `json:"sandboxes"`
	CPU       float64 `json:"cpu"`
	MemoryMB  int64   `json:"memory_mb"`
	Leases    int     `json:"leases"`
	// Volumes and VolumeMB are the tenant's named volumes and their summed
	// size_mb (not counted by UsageOf, which sums sandboxes).
	Volumes  int   `json:"volumes"`
	VolumeMB int64 `json:"volume_mb"`
}

// Add returns u with one more sandbox of r (and one more lease if lease).
func (u Usage) Add(r sandbox.Resources, lease bool) Usage {
	u.Sandboxes++
	u.CPU += r.CPU
	u.MemoryMB += r.MemoryMB
	if lease {
		u.Leases++
	}
	return u
}

// UsageOf sums what the live sandboxes of one tenant hold (a leased or
// busy one holds a lease too), and returns the one that expires first
// (zero if none expires).
func UsageOf(live []*sandbox.Sandbox) (Usage, sandbox.Sandbox) {
	var u Usage
	var first sandbox.Sandbox
	for _, sb := range live {
		u = u.Add(sb.Resources, sb.State == sandbox.StateLeased || sb.State == sandbox.StateBusy)
		if sb.ExpiresAt != nil && (first.ExpiresAt == nil || sb.ExpiresAt.Before(*first.ExpiresAt)) {
			first = *sb
		}
	}
	return u, first
}

// Exceeded returns a description of the first quota that next goes over, or
// "" when next fits. A sandbox that the caller already counts (for example a
// warm sandbox being leased) is the caller's to leave out of next.
func (q Quotas) Exceeded(next Usage) string {
	// CPU is compared with a small tolerance: 0.1+0.2 must fit in 0.3.
	const eps = 1e-9
	switch {
	case q.MaxSandboxes > 0 && next.Sandboxes > q.MaxSandboxes:
		return fmt.Sprintf("max_sandboxes %d (would be %d)", q.MaxSandboxes, next.Sandboxes)
	case q.MaxCPU > 0 && next.CPU > q.MaxCPU+eps:
		return fmt.Sprintf("max_cpu %g (would be %g)", q.MaxCPU, next.CPU)
	case q.MaxMemoryMB > 0 && next.MemoryMB > q.MaxMemoryMB:
		return fmt.Sprintf("max_memory_mb %d (would be %d)", q.MaxMemoryMB, next.MemoryMB)
	case q.MaxLeases > 0 && next.Leases > q.MaxLeases:
		return fmt.Sprintf("max_leases %d (would be %d)", q.MaxLeases, next.Leases)
	}
	return ""
}

// VolumeLimits combines the tenant's volume quotas with the service's
// per-tenant ceiling (config volumes.max_per_tenant, max_mb_per_tenant):
// each bound is the tighter of the two that are set, 0 when neither is.
// A tenant's quota narrows the service's limit, never widens it.
func (q Quotas) VolumeLimits(ceilingCount int, ceilingMB int64) (count int, mb int64) {
	return tighter(q.MaxVolumes, ceilingCount), tighter(q.MaxVolumeMB, ceilingMB)
}

// tighter is the smaller of a and b that is set (> 0), or 0.
func tighter[T int | int64](a, b T) T {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// Tenant is the owner of API keys, sandboxes, quotas and audit records.
type Tenant struct {
	Name         string            `json:"name"`
	Weight       int               `json:"weight"`
	MinRiskLevel sandbox.RiskLevel `json:"min_risk_level,omitempty"`
	// MaxToolRiskLevel is the highest risk of an MCP server instance or a
	// skill run the tenant may start ("": the operator's ceiling alone). A
	// request above it is refused, never relabelled.
	MaxToolRiskLevel sandbox.RiskLevel `json:"max_tool_risk_level,omitempty"`
	Admin            bool              `json:"admin"`
	Quotas           Quotas            `json:"quotas"`
	Source           Source            `json:"source"`
	// ResourceVersion is bumped by every update (the ETag of the record).
	ResourceVersion int64     `json:"resource_version"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidName reports whether s is a valid tenant name: lowercase letters,
// digits and dashes, starting with a letter or digit, at most 63 bytes.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Validate checks the tenant's fields (not its identity or times).
func (t *Tenant) Validate() error {
	if !ValidName(t.Name) {
		return errdefs.Invalid("tenant name %q must be 1-63 lowercase letters, digits and dashes", t.Name)
	}
	if t.Weight < 0 || t.Weight > 1000 {
		return errdefs.Invalid("weight must be between 1 and 1000 (0: the default 1), got %d", t.Weight)
	}
	if t.MinRiskLevel != "" && t.MinRiskLevel.Rank() < 0 {
		return errdefs.Invalid("unknown min_risk_level %q", t.MinRiskLevel)
	}
	if t.MaxToolRiskLevel != "" && t.MaxToolRiskLevel.Rank() < 0 {
		return errdefs.Invalid("unknown max_tool_risk_level %q", t.MaxToolRiskLevel)
	}
	return t.Quotas.Validate("quotas")
}

// KeyPrefix starts every generated API key.
const KeyPrefix = "gsk_"

// keySecretBytes is the randomness of a generated key.
const keySecretBytes = 32

// displayLen is how many leading characters of a key are kept for display.
const displayLen = len(KeyPrefix) + 8

var keyIDEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// Key is a stored API key: only its hash is kept.
type Key struct {
	ID          string     `json:"id"`
	Tenant      string     `json:"tenant"`
	Prefix      string     `json:"prefix"` // the first characters of the key, for display
	Description string     `json:"description,omitempty"`
	Scopes      []string   `json:"scopes,omitempty"`
	Hash        [32]byte   `json:"-"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
}

// Key scopes: rights a key holds beyond the API that every key of its
// tenant may use.
const (
	// ScopeApprove decides the MCP calls held for approval and approves
	// changed tool definitions (pins), of instances the key did not make.
	// An agent's key should not have it: the approval is a person's.
	ScopeApprove = "approve"
)

// ValidateScopes refuses unknown and repeated scopes.
func ValidateScopes(scopes []string) error {
	seen := map[string]bool{}
	for _, sc := range scopes {
		if sc != ScopeApprove {
			return errdefs.Invalid("unknown key scope %q (known: %s)", sc, ScopeApprove)
		}
		if seen[sc] {
			return errdefs.Invalid("key scope %q is given twice", sc)
		}
		seen[sc] = true
	}
	return nil
}

// Revoked reports whether the key is revoked.
func (k *Key) Revoked() bool { return k.RevokedAt != nil }

// NewKey generates a key for tenant from rnd (crypto/rand.Reader in the
// service). It returns the stored record and the secret, which is shown
// once and never kept.
func NewKey(rnd io.Reader, tenant, description string, now time.Time) (*Key, string, error) {
	var b [keySecretBytes + 10]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return nil, "", fmt.Errorf("generating an API key: %v: %w", err, errdefs.ErrInternal)
	}
	secret := KeyPrefix + hex.EncodeToString(b[:keySecretBytes])
	k := &Key{
		ID:          "key_" + keyIDEncoding.EncodeToString(b[keySecretBytes:]),
		Tenant:      tenant,
		Prefix:      secret[:displayLen],
		Description: description,
		Hash:        HashKey(secret),
		CreatedAt:   now.UTC(),
	}
	return k, secret, nil
}

// HashKey returns the digest under which a key is stored and looked up. A
// plain SHA-256 is enough for keys with 256 bits of randomness.
func HashKey(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// Matches compares h with the key's hash in constant time.
func (k *Key) Matches(h [32]byte) bool { return subtle.ConstantTimeCompare(h[:], k.Hash[:]) == 1 }

// ConfigKeyID is the stable id under which a key given in the config (or on
// the command line) appears in audit records: derived from its hash, so it
// reveals nothing of the key.
func ConfigKeyID(h [32]byte) string { return configKeyPrefix + hex.EncodeToString(h[:6]) }

const configKeyPrefix = "cfgkey_"

// IsConfigKeyID reports whether id is a ConfigKeyID (not a stored key's).
func IsConfigKeyID(id string) bool { return strings.HasPrefix(id, configKeyPrefix) }

// ConfigKeyIDs maps keys given in the config or on the command line (the
// secret to its tenant) to their ConfigKeyID and tenant.
func ConfigKeyIDs(keys map[string]string) map[string]string {
	out := make(map[string]string, len(keys))
	for k, t := range keys {
		out[ConfigKeyID(HashKey(k))] = t
	}
	return out
}

// Principal is who makes a request: a key of a tenant.
type Principal struct {
	Tenant string
	KeyID  string
	// KeyTenant is the tenant the key belongs to: Tenant, unless an admin
	// key acts for Tenant.
	KeyTenant string
	Admin     bool
	// Scopes are the key's scopes (ScopeApprove).
	Scopes []string
}

// Has reports whether the key holds scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }
