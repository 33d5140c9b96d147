// Package fake is an in-memory driver.Driver (and driver.ImageImporter) for
// unit tests of the layers above the driver seam: pools, control, httpapi.
//
// It keeps containers, images and labels in maps, follows Docker's state
// names (created, running, exited), never runs a process, and lets tests
// inject failures per operation. It must not import anything but the driver
// contract, sandbox and errdefs.
package fake
