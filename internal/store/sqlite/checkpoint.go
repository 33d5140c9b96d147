package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"
)

// The checkpointer's pace: it aims at checkpointFrames frames a
// checkpoint, SQLite's own automatic threshold, pausing in between as long
// as the last pause's writes say that takes, from checkpointMinPause to
// checkpointMaxPause (so an idle service wakes rarely and a burst is
// copied within seconds). Few, larger checkpoints matter beyond their
// writes: a complete one lets the next commit restart the WAL, which makes
// every connection drop its page cache and read its pages again; at a
// fixed half second a quiet service's leases paid ≈ 0.35 ms for that.
const (
	checkpointFrames   = 1000
	checkpointMinPause = 500 * time.Millisecond
	checkpointMaxPause = 4 * time.Second
)

// checkpointer copies the WAL's pages into the database file off the write
// path. The write connection runs with wal_autocheckpoint=0: SQLite's
// automatic checkpoint runs inside the commit that crosses its threshold
// and holds that commit (and every writer queued behind the single write
// connection) for the checkpoint's writes and fsyncs, which made the tail
// of a job's insert. Here a connection of its own runs PASSIVE checkpoints,
// which take no writer lock: commits go on while it copies and syncs.
// Durability is unchanged: a commit is in the WAL either way, and a crash
// replays the WAL on the next open.
type checkpointer struct {
	db   *sql.DB
	log  *slog.Logger
	stop context.CancelFunc
	done sync.WaitGroup
}

// startCheckpointer runs checkpoints on db (a pool of one connection) until
// close.
func startCheckpointer(db *sql.DB, log *slog.Logger) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, log: log, stop: cancel}
	c.done.Add(1)
	go c.run(ctx)
	return c
}

func (c *checkpointer) run(ctx context.Context) {
	defer c.done.Done()
	t := time.NewTimer(checkpointMinPause)
	defer t.Stop()
	pause := checkpointMinPause
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w, err := c.checkpoint(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("sqlite store: WAL checkpoint", "err", err)
		}
		pause = nextPause(pause, w, err)
		t.Reset(pause)
	}
}

// nextPause is the pause after a checkpoint that found the WAL at w (or
// failed with err), the last pause being pause. A complete checkpoint lets
// the next commit restart the WAL, so its frames are, in the main, what
// the last pause's commits wrote: fewer than checkpointFrames, wait
// longer; more than twice that (or a reader holding pages back, which
// keeps the WAL growing), shorter.
func nextPause(pause time.Duration, w walState, err error) time.Duration {
	switch {
	case err != nil:
		return checkpointMaxPause
	case w.frames < checkpointFrames:
		return min(2*pause, checkpointMaxPause)
	case w.frames > 2*checkpointFrames || w.copied < w.frames:
		return max(pause/2, checkpointMinPause)
	}
	return pause
}

// walState is the WAL after a checkpoint: its frames and how many of them
// are in the database file.
type walState struct{ frames, copied int }

// checkpoint runs one PASSIVE checkpoint.
func (c *checkpointer) checkpoint(ctx context.Context) (walState, error) {
	var busy int
	var w walState
	err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &w.frames, &w.copied)
	return w, err
}

// close stops the checkpoints and closes the connection; the write
// connection's close checkpoints what is left.
func (c *checkpointer) close() error {
	c.stop()
	c.done.Wait()
	return c.db.Close()
}
