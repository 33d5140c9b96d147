package instances

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Several service instances may share one store (PostgreSQL). Each owns
// the sandboxes it made (their records name it) and holds the store lock
// "instance:<id>" for as long as it lives. One of them, the holder of the
// lock "leader", looks for instances whose lock is free — the process is
// gone — and adopts their sandboxes: their records name the leader from
// then on, so its reconciler, lease reaping, TTLs and pool keep them, and
// its driver reaches their agents (a Kubernetes Pod's address and token
// do not depend on which instance made it). With a store that one process
// uses (SQLite) there is nobody to adopt from.

// AdoptEvery is how often the leader looks for instances that are gone.
const AdoptEvery = 2 * time.Second

// Records is what an Instance reads and changes of the store's records
// besides its locks and adoption.
type Records interface {
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error)
	DropLeaseHolds(ctx context.Context, instance string, now time.Time) (int, error)
}

// Config configures an Instance.
type Config struct {
	// ID is this instance's id (its data dir's instance-id).
	ID      string
	Locker  store.Locker
	Adopter store.Adopter
	Records Records
	// LiveStates are the states of a sandbox that is not gone: the
	// sandboxes of a gone instance in them are finished after adoption.
	LiveStates []sandbox.State
	// Finish ends what a gone instance left half done in one of the
	// sandboxes this instance adopted from it, as at a start-up.
	Finish func(ctx context.Context, sb *sandbox.Sandbox)
	// Lost is called once when this instance's own lock is lost (the
	// database connection broke): another instance may adopt its
	// sandboxes now, so it must stop taking work.
	Lost   func()
	Logger *slog.Logger
	Now    func() time.Time
}

// Instance is a running instance's part in sharing a store.
type Instance struct {
	cfg  Config
	self store.Lock // "instance:<id>"

	mu      sync.Mutex
	leader  store.Lock      // held while this instance leads
	adopted map[string]bool // instances whose sandboxes this one adopted
}

func instanceLock(id string) string { return "instance:" + id }

// Start takes this instance's lock. Another live process with the same
// instance id is refused (errdefs.ErrFailedPrecondition). With a store of
// one process (Locker answers errdefs.ErrNotImplemented) it returns nil
// and no error: there is nothing to share.
func Start(ctx context.Context, cfg Config) (*Instance, error) {
	if cfg.ID == "" || cfg.Locker == nil || cfg.Adopter == nil || cfg.Records == nil || cfg.Finish == nil || cfg.Lost == nil || cfg.Now == nil {
		return nil, fmt.Errorf("instances: incomplete config: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	self, held, err := cfg.Locker.TryLock(ctx, instanceLock(cfg.ID))
	if errors.Is(err, errdefs.ErrNotImplemented) {
		return nil, nil // a store of one process
	}
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("control: another process runs as instance %s on this store (its data dir's instance-id): %w", cfg.ID, errdefs.ErrFailedPrecondition)
	}
	return &Instance{cfg: cfg, self: self, adopted: map[string]bool{}}, nil
}

// Run campaigns for leadership and, as leader, adopts the sandboxes of
// gone instances every AdoptEvery, and watches this instance's lock, until
// ctx ends; then it releases its locks.
func (in *Instance) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		select {
		case <-ctx.Done():
			in.self.Release()
		case <-in.self.Lost():
			in.cfg.Logger.Error("lost this instance's store lock (the database connection broke); draining: restart the service")
			in.cfg.Lost()
		}
	})
	t := time.NewTicker(AdoptEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			in.mu.Lock()
			if in.leader != nil {
				in.leader.Release()
			}
			in.mu.Unlock()
			return
		case <-t.C:
			in.lead(ctx)
		}
	}
}

// Leader says whether this instance leads the instances sharing its store.
func (in *Instance) Leader() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.leader != nil
}

// Owns says whether containers labelled with instance inst are this
// instance's to judge: its own, or those of an instance it adopted.
func (in *Instance) Owns(inst string) bool {
	if inst == in.cfg.ID {
		return true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.adopted[inst]
}

// lead campaigns for leadership and, as leader, adopts the sandboxes of
// instances that are gone.
func (in *Instance) lead(ctx context.Context) {
	in.mu.Lock()
	leader := in.leader
	in.mu.Unlock()
	if leader != nil {
		select {
		case <-leader.Lost():
			in.cfg.Logger.Warn("lost the leader lock")
			leader.Release()
			in.mu.Lock()
			in.leader = nil
			in.mu.Unlock()
			return
		default:
		}
	} else {
		l, ok, err := in.cfg.Locker.TryLock(ctx, "leader")
		if err != nil || !ok {
			return
		}
		in.cfg.Logger.Info("this instance leads the instances sharing the store")
		in.mu.Lock()
		in.leader = l
		in.mu.Unlock()
	}
	if err := in.adoptGone(ctx); err != nil && !errors.Is(err, context.Canceled) {
		in.cfg.Logger.Warn("adopting the sandboxes of gone instances", "err", err)
	}
}

// adoptGone adopts the sandboxes of every instance named by a live record
// whose lock is free.
func (in *Instance) adoptGone(ctx context.Context) error {
	owners, err := in.cfg.Adopter.LiveInstances(ctx)
	if err != nil {
		return err
	}
	for _, inst := range owners {
		if inst == in.cfg.ID {
			continue
		}
		l, free, err := in.cfg.Locker.TryLock(ctx, instanceLock(inst))
		if err != nil {
			return err
		}
		if !free {
			continue // alive
		}
		theirs, err := in.cfg.Records.ListSandboxes(ctx, store.SandboxFilter{Instance: inst, States: in.cfg.LiveStates})
		if err != nil {
			l.Release()
			return err
		}
		n, err := in.cfg.Adopter.AdoptSandboxes(ctx, inst, in.cfg.ID, in.cfg.Now())
		if err == nil {
			// Its cold leases being made died with it.
			_, err = in.cfg.Records.DropLeaseHolds(ctx, inst, in.cfg.Now())
		}
		l.Release()
		if err != nil {
			return err
		}
		in.mu.Lock()
		in.adopted[inst] = true
		in.mu.Unlock()
		in.cfg.Logger.Warn("adopted the sandboxes of an instance that is gone", "instance", inst, "sandboxes", n)
		// What the gone process left half done ends now, as at a start-up.
		for _, r := range theirs {
			cur, err := in.cfg.Records.GetSandbox(ctx, "", r.ID)
			if err == nil && cur.Instance == in.cfg.ID {
				in.cfg.Finish(ctx, cur)
			}
		}
	}
	return nil
}
