package egress

import "slices"

// Equal reports whether p and q are the same policy. Both should be
// normalized; a nil and an empty list are the same.
func (p Policy) Equal(q Policy) bool {
	return p.Mode == q.Mode && slices.Equal(p.Endpoints, q.Endpoints) && slices.Equal(p.Tools, q.Tools) &&
		slices.EqualFunc(p.Allow, q.Allow, func(a, b Rule) bool {
			return a.Host == b.Host && a.CIDR == b.CIDR && slices.Equal(a.Ports, b.Ports)
		})
}
