// Package imagebuild builds the profile images described by package images
// on the local machine, without a registry: debootstrap a minimal Debian root
// filesystem, install the recipe's packages with apt in a chroot (apt, not
// debootstrap's --include, so dependency alternatives resolve properly and
// recommends stay out), run the recipe's setup scripts, stream the tree as a
// tarball into an image import, and tag it with the recipe's Ref. Package
// downloads are cached per suite under the work directory.
//
// Images are keyed by recipe hash: a build is skipped when the image is
// already present. Builds run one at a time in a process, and a file lock
// under the work directory keeps two processes from building the same image.
//
// A build reports its progress (Builder.Progress): its state, its step
// (bootstrap, packages, setup, import) and what the step counted, read from
// debootstrap's and apt's output, with an estimated percentage; steps and
// counters also go to the log. A build mirrors its progress into a status
// file under the work directory while it holds its lock, so another process
// sees it (ReadStatus). A Queue builds a list of images in the background,
// one after another, and reports each one's state.
// Every scratch directory is removed after a build, also on failure, and
// nothing mounted during a build survives it.
//
// This package owns host commands (debootstrap, chroot, tar) and the scratch
// space. It reaches the container engine only through the Importer it is
// given and must not import a Docker client, the store or the HTTP layer.
package imagebuild
