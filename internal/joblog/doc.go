// Package joblog keeps the durable output of jobs on the host: one
// append-only file of agentproto frames per job under the data dir, so a
// job's stdout and stderr stay separate, every byte stays addressable, and
// the output outlives the sandbox and survives a service restart.
//
// A cursor is a byte offset into the log file at a frame boundary; readers
// resume from a cursor with no gap and no duplicate, and followers are woken
// when frames are appended.
//
// A store may keep spare files (KeepSpares): empty files made ahead in the
// background that a new log is renamed from (renameat2, never replacing a
// log), because creating a file on an exec's path waited on the
// filesystem's journal. It imports only agentproto, errdefs and
// golang.org/x/sys/unix.
package joblog
