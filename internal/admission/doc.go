// Package admission accounts for the capacity of one host (CPU, memory and
// the number of sandboxes) and decides which create or lease request gets it
// when it is scarce.
//
// A request that fits while nobody waits is granted at once. Otherwise it
// waits in its tenant's FIFO queue, and whenever capacity is released the
// queues are served by weighted deficit round robin: each backlogged tenant
// earns credit in proportion to its weight on every round and spends it on
// the cost of its requests (the request's dominant share of the host). A
// tenant that floods requests therefore gets no more than its weighted share
// while another tenant is waiting.
//
// A request chosen by the round robin that does not fit yet is not passed by
// smaller requests: nothing else is granted until enough capacity is released
// for it (or it gives up). That way a large request is never starved by a
// stream of small ones; the price is that capacity can stay idle for a while
// before it.
//
// Holds ties what each live sandbox was granted to its id, so it goes back
// when the sandbox ends by whichever path, with a sweep of holds whose
// sandbox is gone.
//
// The package is pure Go: it imports errdefs and the sandbox domain types and
// nothing that touches Docker, the store or the network.
package admission
