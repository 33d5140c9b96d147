// Package apiwire holds every conversion between the domain types of the
// packages the API calls and the wire types of package api: an edge (the
// HTTP API, the gRPC API) decodes an api type, converts it here (wire →
// domain), calls the application, and converts the answer here (domain →
// wire). TestWireConversions fails when a field is added to one side and
// not carried to the other. One exception: the driver's probe in the
// capabilities answer (httpapi's handlers.go), whose types the API may not
// name.
//
// apiwire sits below the edges and above the packages whose types it
// converts: it imports api, the domain and workload packages it converts
// and errdefs; never an edge (httpapi), the public SDK (client), the store
// or a driver (internal/layering states the rule).
package apiwire
