// Package imagestate says where the images of the configured profiles
// stand on this host: the reference a profile runs (its recipe's under the
// image repository, or the image the configuration names), whether it is
// present, the background build that makes it, and the wait for that build
// a create may ask for, with the errors that say what to do
// (image_not_built, image_building with the build's progress).
//
// It owns no lifecycle: control asks it before it creates a sandbox and
// lists the images through it. It imports config, imagebuild (the build
// progress), images (the recipes) and errdefs only; never control, the
// store, a driver package or an API package.
package imagestate
