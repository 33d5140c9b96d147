package volumes

// Limits are the bounds on volumes this manager enforces (config volumes:).
type Limits struct {
	// MaxSizeMB bounds one volume; MaxMBPerTenant the summed size of a
	// tenant's volumes; MaxPerTenant their number (0: no bound).
	MaxSizeMB      int64
	MaxMBPerTenant int64
	MaxPerTenant   int
}

// Limits answers the bounds this manager enforces.
func (m *Manager) Limits() Limits {
	return Limits{MaxSizeMB: m.cfg.MaxSizeMB, MaxMBPerTenant: m.cfg.MaxMBPerTenant, MaxPerTenant: m.cfg.MaxPerTenant}
}
