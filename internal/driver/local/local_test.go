package local

import (
	"testing"

	"genesis.dev/sandbox/internal/driver/fake"
)

// reachingDriver is a driver that answers whether mounts below a
// directory reach its containers.
type reachingDriver struct {
	*fake.Driver
	dirs []string // what MountsReach was asked about
	ok   bool
	why  string
}

func (d *reachingDriver) MountsReach(dir string) (bool, string) {
	d.dirs = append(d.dirs, dir)
	return d.ok, d.why
}

// TestQuotaAvailableAsksTheDriver: a driver whose containers would not see
// the workspace mounts (the service in a container, its data dir on a
// volume) makes quotas unavailable with its reason, whatever the host could
// do; otherwise, and for a driver that does not say, the host decides.
func TestQuotaAvailableAsksTheDriver(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	plain, err := New(Config{Driver: fake.New(fake.Config{}), Root: root, AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hostOK, hostWhy := plain.quota.Available()
	if got, why := plain.QuotaAvailable(); got != hostOK || why != hostWhy {
		t.Errorf("QuotaAvailable without the driver's answer = %v %q, the host's is %v %q", got, why, hostOK, hostWhy)
	}

	d := &reachingDriver{Driver: fake.New(fake.Config{}), why: "on volume genesis-data"}
	l, err := New(Config{Driver: d, Root: root, AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := l.QuotaAvailable(); ok || why != d.why || len(d.dirs) != 1 || d.dirs[0] != root {
		t.Errorf("QuotaAvailable = %v %q (driver asked about %v); want false with the driver's reason about %s", ok, why, d.dirs, root)
	}
	d.ok, d.why = true, ""
	if ok, why := l.QuotaAvailable(); ok != hostOK || why != hostWhy {
		t.Errorf("QuotaAvailable with reaching mounts = %v %q; want the host's %v %q", ok, why, hostOK, hostWhy)
	}
}
