// Package joblog keeps the durable output of jobs on the host: one
// append-only file of agentproto frames per job under the data dir, so a
// job's stdout and stderr stay separate, every byte stays addressable, and
// the output outlives the sandbox and survives a service restart.
//
// A cursor is a byte offset into the log file at a frame boundary; readers
// resume from a cursor with no gap and no duplicate, and followers are woken
// when frames are appended. It imports only agentproto and errdefs.
package joblog
