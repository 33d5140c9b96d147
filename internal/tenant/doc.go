// Package tenant holds the domain types of tenants, their API keys, quotas
// and audit records, and the pure logic around them: name and quota
// validation, key generation from caller-supplied randomness, and quota
// arithmetic that takes the current usage as an argument.
//
// It imports only errdefs and sandbox; it must not import store, control,
// httpapi or any driver.
package tenant
