package driver

import (
	"errors"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestParseUser(t *testing.T) {
	for _, tc := range []struct {
		in       string
		uid, gid uint32
		bad      bool
	}{
		{"", 0, 0, false},
		{"1000", 1000, 1000, false},
		{"1000:2000", 1000, 2000, false},
		{"0:0", 0, 0, false},
		{"root", 0, 0, true},
		{"1000:staff", 0, 0, true},
		{"-1", 0, 0, true},
		{"4294967296", 0, 0, true},
	} {
		uid, gid, err := ParseUser(tc.in)
		if tc.bad {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("ParseUser(%q) = %d, %d, %v; want invalid", tc.in, uid, gid, err)
			}
			continue
		}
		if err != nil || uid != tc.uid || gid != tc.gid {
			t.Errorf("ParseUser(%q) = %d, %d, %v; want %d, %d", tc.in, uid, gid, err, tc.uid, tc.gid)
		}
	}
}
