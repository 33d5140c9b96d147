// Package imagecli is the image builder's command line: the build and ls
// subcommands that both `sandbox-service images` and the small
// genesis-images binary run. It wires the Docker driver into imagebuild
// and reads the service's config only for its image_repository; it knows
// no service, store or API, and must not import control or httpapi.
package imagecli
