package trace

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// CodeInvalidEvent is the problem code of an event or interrupt a caller
// may not post.
const CodeInvalidEvent = "invalid_trace_event"

// CallerEvent checks an event a caller posts (POST …/trace/events) before
// anything else is looked at: its kind KindAnnotation or KindTaskStatus,
// its actor api (the default), agent or human:<who>, never system.
func CallerEvent(e Event) (Event, error) {
	if !CallerKind(e.Kind) {
		return e, errdefs.WithCode(CodeInvalidEvent, fmt.Errorf(
			"kind %q: a caller may post annotation or task.status: %w", e.Kind, errdefs.ErrInvalidArgument))
	}
	if e.Actor == "" {
		e.Actor = ActorAPI
	}
	if e.Actor == ActorSystem || !ValidActor(e.Actor) {
		return e, errdefs.WithCode(CodeInvalidEvent, fmt.Errorf(
			"actor %.80q: want api, agent or human:<who>, who %s: %w", e.Actor, HumanNameRule, errdefs.ErrInvalidArgument))
	}
	return e, nil
}

// AppendCaller appends an event CallerEvent let through; a refusal of its
// data (not an object, too large) carries CodeInvalidEvent, as the API
// documents. (The HTTP layer's check of this compared errdefs.Code with "",
// which is never "" for a class error, so such refusals went out as
// invalid_argument.)
func (s *Store) AppendCaller(ctx context.Context, tenant, sandboxID string, e Event) (Event, error) {
	e, err := s.Append(ctx, tenant, sandboxID, e)
	var coded errdefs.Coded
	if errors.Is(err, errdefs.ErrInvalidArgument) && !errors.As(err, &coded) {
		err = errdefs.WithCode(CodeInvalidEvent, err)
	}
	return e, err
}

// CallerInterruptActor is the actor of a caller's interrupt (pause,
// resume, step, abort): api (the default for "") or human:<who>.
func CallerInterruptActor(actor string) (string, error) {
	if actor == "" {
		return ActorAPI, nil
	}
	if actor != ActorAPI && (!ValidActor(actor) || !strings.HasPrefix(actor, "human:")) {
		return "", errdefs.WithCode(CodeInvalidEvent, fmt.Errorf(
			"actor %.80q: want api or human:<who>, who %s: %w", actor, HumanNameRule, errdefs.ErrInvalidArgument))
	}
	return actor, nil
}
