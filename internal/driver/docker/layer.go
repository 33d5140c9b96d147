package docker

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"genesis.dev/sandbox/internal/errdefs"
)

// LayerSpec describes an image made of a local base image and files laid
// over it.
type LayerSpec struct {
	// Base is the local image the new one starts from. It is never pulled.
	Base string
	// Ref is the new image's reference, repository:tag.
	Ref string
	// Files is a tar stream unpacked at / of the base image.
	Files io.Reader
	// Config is the new image's run configuration; the base image's
	// labels are kept unless Config.Labels sets the same key.
	Config ImageConfig
}

// ImageConfig is the run configuration of an image made by AddLayer.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Labels     map[string]string
	// ExposedPorts are "port/proto", e.g. "8080/tcp".
	ExposedPorts []string
	// Volumes are the image's volume mount points.
	Volumes []string
}

// containerConfig is the Engine API's container configuration as the
// create and commit calls take it.
type containerConfig struct {
	Image        string              `json:"Image,omitempty"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	Env          []string            `json:"Env"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
}

func (c ImageConfig) wire(image string) containerConfig {
	set := func(keys []string) map[string]struct{} {
		if len(keys) == 0 {
			return nil
		}
		m := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			m[k] = struct{}{}
		}
		return m
	}
	return containerConfig{
		Image: image, Entrypoint: slices.Clone(c.Entrypoint), Cmd: slices.Clone(c.Cmd), Env: slices.Clone(c.Env),
		WorkingDir: c.WorkingDir, Labels: maps.Clone(c.Labels), ExposedPorts: set(c.ExposedPorts), Volumes: set(c.Volumes),
	}
}

// AddLayer makes image spec.Ref from spec.Base plus spec.Files, without a
// build engine or a registry: a container is created from the base (never
// started), the files are copied into it, and it is committed as the new
// image and removed, also when a step fails. A missing base is
// image_not_built. It returns the new image's id. The copy is bounded by
// ImportTimeout, every other call by CallTimeout.
func (d *Driver) AddLayer(ctx context.Context, spec LayerSpec) (string, error) {
	repo, tag, err := splitRef(spec.Ref)
	if err != nil {
		return "", err
	}
	if err := validRef(spec.Base); err != nil {
		return "", err
	}
	if spec.Files == nil {
		return "", errdefs.Invalid("docker: add layer: no files")
	}
	cfg := spec.Config.wire(spec.Base)
	if len(cfg.Entrypoint) == 0 && len(cfg.Cmd) == 0 {
		return "", errdefs.Invalid("docker: add layer %s: the image needs an entrypoint or a command", spec.Ref)
	}
	cctx, cancel := d.callCtx(ctx, 0)
	present, err := d.imagePresent(cctx, spec.Base)
	cancel()
	if err != nil {
		return "", err
	}
	if !present {
		return "", imageNotBuilt(spec.Base)
	}

	cctx, cancel = d.callCtx(ctx, 0)
	var created createResponse
	err = d.api.call(cctx, request{op: "create container from " + spec.Base, method: http.MethodPost, path: "/containers/create", body: cfg}, &created)
	cancel()
	if err != nil {
		return "", err
	}
	defer d.rollback(ctx, created.ID) // the container is only a means

	tctx, cancel := context.WithTimeout(ctx, d.cfg.ImportTimeout)
	src := &errReader{r: spec.Files}
	op := "copy files into " + shortID(created.ID)
	err = d.api.call(tctx, request{op: op, method: http.MethodPut, path: "/containers/" + created.ID + "/archive",
		query: url.Values{"path": {"/"}}, rawBody: src, contentType: "application/x-tar"}, nil)
	cancel()
	if src.err != nil {
		return "", fmt.Errorf("docker: %s: reading files: %w", op, src.err)
	}
	if err != nil {
		return "", err
	}

	cctx, cancel = d.callCtx(ctx, 0)
	defer cancel()
	cfg.Image = ""
	var committed struct {
		ID string `json:"Id"`
	}
	q := url.Values{"container": {created.ID}, "repo": {repo}, "tag": {tag}, "pause": {"false"}}
	if err := d.api.call(cctx, request{op: "commit " + spec.Ref, method: http.MethodPost, path: "/commit", query: q, body: cfg}, &committed); err != nil {
		return "", err
	}
	d.log.InfoContext(ctx, "made image", "ref", spec.Ref, "base", spec.Base, "id", committed.ID)
	return committed.ID, nil
}

// TagImage gives the local image src the reference ref (repository:tag).
func (d *Driver) TagImage(ctx context.Context, src, ref string) error {
	if err := validRef(src); err != nil {
		return err
	}
	repo, tag, err := splitRef(ref)
	if err != nil {
		return err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	q := url.Values{"repo": {repo}, "tag": {tag}}
	err = d.api.call(ctx, request{op: "tag image " + src + " as " + ref, method: http.MethodPost, path: "/images/" + src + "/tag", query: q}, nil)
	if statusOf(err) == http.StatusNotFound {
		return imageNotBuilt(src)
	}
	return err
}
