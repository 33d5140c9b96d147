package api

import "encoding/json"

// The sandbox, lease and network objects name their version
// resource_version, as every other field is named. They were first served
// as resourceVersion, which the service still sends beside it for clients
// that read that name (deprecated), and which these types still read from
// a service that sends only that.

// legacyVersion is the deprecated resourceVersion field.
type legacyVersion struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// MarshalJSON writes resource_version and its deprecated alias
// resourceVersion.
func (s Sandbox) MarshalJSON() ([]byte, error) {
	type plain Sandbox
	return json.Marshal(struct {
		plain
		legacyVersion
	}{plain(s), legacyVersion{s.ResourceVersion}})
}

// UnmarshalJSON reads resource_version, or resourceVersion when only that
// is sent.
func (s *Sandbox) UnmarshalJSON(b []byte) error {
	type plain Sandbox
	var v struct {
		plain
		legacyVersion
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Sandbox(v.plain)
	if s.ResourceVersion == "" {
		s.ResourceVersion = v.legacyVersion.ResourceVersion
	}
	return nil
}

// MarshalJSON writes resource_version and its deprecated alias
// resourceVersion.
func (l Lease) MarshalJSON() ([]byte, error) {
	type plain Lease
	return json.Marshal(struct {
		plain
		legacyVersion
	}{plain(l), legacyVersion{l.ResourceVersion}})
}

// UnmarshalJSON reads resource_version, or resourceVersion when only that
// is sent.
func (l *Lease) UnmarshalJSON(b []byte) error {
	type plain Lease
	var v struct {
		plain
		legacyVersion
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Lease(v.plain)
	if l.ResourceVersion == "" {
		l.ResourceVersion = v.legacyVersion.ResourceVersion
	}
	return nil
}

// MarshalJSON writes resource_version and its deprecated alias
// resourceVersion.
func (n SandboxNetwork) MarshalJSON() ([]byte, error) {
	type plain SandboxNetwork
	return json.Marshal(struct {
		plain
		legacyVersion
	}{plain(n), legacyVersion{n.ResourceVersion}})
}

// UnmarshalJSON reads resource_version, or resourceVersion when only that
// is sent.
func (n *SandboxNetwork) UnmarshalJSON(b []byte) error {
	type plain SandboxNetwork
	var v struct {
		plain
		legacyVersion
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*n = SandboxNetwork(v.plain)
	if n.ResourceVersion == "" {
		n.ResourceVersion = v.legacyVersion.ResourceVersion
	}
	return nil
}
