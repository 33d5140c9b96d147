// Package images holds the recipes of the profile images (one directory per
// profile, each with a recipe.json, plus shared setup scripts under common/,
// and service/: the base of the service's own container image) and turns
// them into Recipe values whose Hash and Ref name the exact image a
// recipe produces.
//
// The service uses Ref to know which local image a profile needs and the
// builder (internal/imagebuild) tags what it builds with the same Ref, so the
// two always agree. This package is pure: it reads only its embedded files and
// must not import Docker clients, os/exec or anything that touches the host.
package images
