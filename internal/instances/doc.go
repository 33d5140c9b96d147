// Package instances is one service instance's part in sharing a store
// with others (PostgreSQL): the lock "instance:<id>" it holds for as long
// as it lives, the election of the leader (the holder of the lock
// "leader") and the leader's adoption of the sandboxes of instances that
// are gone (their lock is free).
//
// Control starts an Instance at its start and forwards Leader and Owns to
// it; what a gone instance left half done is finished through
// Config.Finish, which control supplies. The package imports the store's
// contract, sandbox and errdefs only; never control, a driver, a workload
// or an API package.
package instances
