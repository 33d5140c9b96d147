package trace_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

func TestCallerEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		e     trace.Event
		actor string // the actor let through; "" for a refusal
	}{
		{"annotation, default actor", trace.Event{Kind: trace.KindAnnotation}, trace.ActorAPI},
		{"task status by a person", trace.Event{Kind: trace.KindTaskStatus, Actor: "human:ann"}, "human:ann"},
		{"by the agent", trace.Event{Kind: trace.KindAnnotation, Actor: trace.ActorAgent}, trace.ActorAgent},
		{"a producer's kind", trace.Event{Kind: trace.KindJobStarted}, ""},
		{"as the system", trace.Event{Kind: trace.KindAnnotation, Actor: trace.ActorSystem}, ""},
		{"a bad name", trace.Event{Kind: trace.KindAnnotation, Actor: "human:<b>"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := trace.CallerEvent(tc.e)
			if tc.actor == "" {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != trace.CodeInvalidEvent {
					t.Fatalf("%+v: %v, want %s", tc.e, err, trace.CodeInvalidEvent)
				}
				return
			}
			if err != nil || e.Actor != tc.actor {
				t.Fatalf("%+v: %+v %v, want actor %s", tc.e, e, err, tc.actor)
			}
		})
	}
	for actor, want := range map[string]string{"": trace.ActorAPI, "api": "api", "human:bo": "human:bo", "agent": "", "system": "", "human:": ""} {
		got, err := trace.CallerInterruptActor(actor)
		if got != want || (want == "") != (errdefs.Code(err) == trace.CodeInvalidEvent) {
			t.Errorf("interrupt actor %q: %q %v, want %q", actor, got, err, want)
		}
	}
	// Data the store refuses is the caller's error, with the same code.
	s := open(t, t.TempDir(), func() time.Time { return time.Unix(0, 0) })
	_, err := s.AppendCaller(context.Background(), "t1", "sb", trace.Event{Actor: trace.ActorAPI, Kind: trace.KindAnnotation, Data: json.RawMessage(`[1]`)})
	if errdefs.Code(err) != trace.CodeInvalidEvent {
		t.Fatalf("array data: %v", err)
	}
}
