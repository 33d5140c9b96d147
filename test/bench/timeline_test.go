package bench

import (
	"slices"
	"testing"
	"time"
)

func TestCreateTimelines(t *testing.T) {
	t.Parallel()
	log := `time=2026-12-06T13:51:52.407Z level=DEBUG msg="request" method=POST path=/v1/sandboxes
time=2026-12-06T13:51:58.511Z level=DEBUG msg="create timeline" sandbox=sbx_1 runtime=runc validate=160µs container_start=120ms total=150ms
time=2026-12-06T13:51:58.611Z level=DEBUG msg="create timeline" sandbox=sbx_2 runtime=runsc validate=1ms container_start=250ms total=300ms
time=2026-12-06T13:51:58.711Z level=DEBUG msg="create timeline" sandbox=sbx_3 runtime=runc validate=2ms container_start=100ms agent_ready=3ms total=110ms
`
	names, steps := CreateTimelines(log, "runc")
	if want := []string{"validate", "container_start", "total", "agent_ready"}; !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
	if got, want := steps["container_start"], []time.Duration{120 * time.Millisecond, 100 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("container_start = %v, want %v", got, want)
	}
	if got := steps["agent_ready"]; !slices.Equal(got, []time.Duration{3 * time.Millisecond}) {
		t.Errorf("agent_ready = %v", got)
	}
	if _, ok := steps["sandbox"]; ok {
		t.Error("the sandbox id was read as a step")
	}
	if names, _ := CreateTimelines(log, "kata"); len(names) != 0 {
		t.Errorf("no kata lines, got steps %v", names)
	}
}
