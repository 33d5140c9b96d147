package imagebuild

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// QueueConfig configures a Queue.
type QueueConfig struct {
	// Builder builds the images. Required.
	Builder *Builder
	// Names are the profiles (recipe names) whose images to make sure of,
	// in the order they are built. Required; each must be a known recipe.
	Names []string
	// OnBuilt, if set, is called with a name once its image is present
	// (built, or found present), from the goroutine of Run.
	OnBuilt func(name string)
	// Logger receives a line a build. Default: discard.
	Logger *slog.Logger
}

// Queue makes sure of a list of images in the background, one after
// another in its order (present ones are skipped in a moment), and
// reports each one's state: queued, then the Builder's progress while it
// is built, then built or failed. A failed build is not retried; the next
// one starts. It is safe for concurrent use.
type Queue struct {
	b       *Builder
	names   []string
	onBuilt func(string)
	log     *slog.Logger

	mu     sync.Mutex
	status map[string]*queued
}

// queued is one name's place in the queue.
type queued struct {
	p    Progress      // the state when not building (queued, built, failed)
	done chan struct{} // closed when its build ends
}

// NewQueue validates cfg. It starts nothing: Run does.
func NewQueue(cfg QueueConfig) (*Queue, error) {
	if cfg.Builder == nil {
		return nil, errdefs.Invalid("imagebuild: queue: Builder is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{b: cfg.Builder, onBuilt: cfg.OnBuilt, log: log.With("component", "imagebuild"), status: map[string]*queued{}}
	for _, name := range cfg.Names {
		if _, dup := q.status[name]; dup {
			continue
		}
		ref, ok := cfg.Builder.Ref(name)
		if !ok {
			return nil, errdefs.Invalid("imagebuild: queue: unknown image profile %q", name)
		}
		q.names = append(q.names, name)
		q.status[name] = &queued{p: Progress{Name: name, Ref: ref, State: StateQueued}, done: make(chan struct{})}
	}
	return q, nil
}

// Run builds the queue's images in order and returns when every build
// has ended, or when ctx ends (the running build is stopped and cleaned
// up, and the builds not started stay queued).
func (q *Queue) Run(ctx context.Context) {
	start := time.Now()
	built, failed := 0, 0
	for _, name := range q.names {
		if ctx.Err() != nil {
			return
		}
		q.set(name, Progress{State: StateBuilding})
		res, err := q.b.Build(ctx, name, false)
		if err != nil {
			if ctx.Err() != nil {
				// Stopped, not failed: a later run builds it.
				q.set(name, Progress{State: StateQueued})
				return
			}
			failed++
			q.log.Error("background image build failed", "profile", name, "err", err)
			q.finish(name, Progress{State: StateFailed, Error: err.Error()})
			continue
		}
		if !res.Skipped {
			built++
		}
		q.finish(name, Progress{State: StateBuilt, Percent: 100})
		if q.onBuilt != nil {
			q.onBuilt(name)
		}
	}
	q.log.Info("background image builds done", "images", len(q.names), "built", built, "failed", failed,
		"duration", time.Since(start).Round(time.Second))
}

// set records name's state (other fields than State, Error and Percent
// are kept).
func (q *Queue) set(name string, p Progress) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.status[name]
	e.p.State, e.p.Error, e.p.Percent = p.State, p.Error, p.Percent
}

// finish records the end of name's build and wakes those who await it.
func (q *Queue) finish(name string, p Progress) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.status[name]
	e.p.State, e.p.Error, e.p.Percent = p.State, p.Error, p.Percent
	e.p.FinishedAt = time.Now()
	close(e.done)
}

// Status returns where the image of name stands; false when it is not in
// the queue.
func (q *Queue) Status(name string) (Progress, bool) {
	q.mu.Lock()
	e, ok := q.status[name]
	var p Progress
	if ok {
		p = e.p
	}
	q.mu.Unlock()
	if !ok {
		return Progress{}, false
	}
	if p.State == StateBuilding {
		if live, ok := q.b.Progress(name); ok && (live.State == StateBuilding || live.State == StateWaiting) {
			live.Name, live.Ref = p.Name, p.Ref
			return live, true
		}
	}
	return p, true
}

// List returns every image of the queue in its order.
func (q *Queue) List() []Progress {
	out := make([]Progress, 0, len(q.names))
	for _, name := range q.names {
		p, _ := q.Status(name)
		out = append(out, p)
	}
	return out
}

// Names returns the queue's names in build order.
func (q *Queue) Names() []string { return slices.Clone(q.names) }

// Await waits until the build of name ends or ctx ends, and returns its
// status then; false when name is not in the queue.
func (q *Queue) Await(ctx context.Context, name string) (Progress, bool) {
	q.mu.Lock()
	e, ok := q.status[name]
	q.mu.Unlock()
	if !ok {
		return Progress{}, false
	}
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	return q.Status(name)
}
