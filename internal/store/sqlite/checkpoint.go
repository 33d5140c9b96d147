package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"
)

// The checkpointer's pace: after a checkpoint that moved pages it looks
// again after checkpointMinPause; with nothing to move the pause doubles
// up to checkpointMaxPause, so an idle service wakes rarely. Half a second
// lets a busy service's rewrites of the same pages (an index's leaf, the
// audit table's last page) coalesce in the WAL, as SQLite's own threshold
// of 1000 frames did, rather than be copied and synced every few commits.
const (
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
	var last walState
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w, err := c.checkpoint(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				c.log.Warn("sqlite store: WAL checkpoint", "err", err)
			}
			pause = checkpointMaxPause
		case w != last || w.copied < w.frames: // written to since, or a reader held pages back
			pause = checkpointMinPause
		default:
			pause = min(2*pause, checkpointMaxPause)
		}
		last = w
		t.Reset(pause)
	}
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
