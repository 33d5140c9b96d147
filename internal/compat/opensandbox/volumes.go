package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Volumes are the named volumes a create's volumes map onto
// (volumes.Manager).
type Volumes interface {
	Get(ctx context.Context, tenant, name string) (*sandbox.Volume, error)
	Create(ctx context.Context, tenant, name string, sizeMB int64) (*sandbox.Volume, error)
}

// osVolume is one entry of a create's volumes in the SDK's shape: a name,
// exactly one backend, and where and how it is mounted. Only the
// platform-managed named volume backend (pvc) is served: it is this
// service's named volume of the tenant called claimName. A host path
// would hand the caller the service's host; OSSFS reaches a network
// store; both are refused.
type osVolume struct {
	Name      string          `json:"name"`
	Host      *map[string]any `json:"host"`
	OSSFS     *map[string]any `json:"ossfs"`
	PVC       *osPVC          `json:"pvc"`
	MountPath string          `json:"mountPath"`
	ReadOnly  bool            `json:"readOnly"`
	SubPath   string          `json:"subPath"`
}

type osPVC struct {
	ClaimName                  string  `json:"claimName"`
	CreateIfNotExists          *bool   `json:"createIfNotExists"`
	DeleteOnSandboxTermination bool    `json:"deleteOnSandboxTermination"`
	Storage                    *string `json:"storage"`
}

// defaultVolumeMB is the size of a volume a create makes without a storage
// request.
const defaultVolumeMB = 1024

var storageRE = regexp.MustCompile(`^([0-9]{1,9})(Mi|Gi|Ti|M|G|T)?$`)

// storageMB reads a Kubernetes quantity of the forms the SDK documents
// ("512Mi", "10Gi") as MiB.
func storageMB(s string) (int64, error) {
	m := storageRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("storage %.30q: a size such as 512Mi or 10Gi", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	switch m[2] {
	case "", "Mi", "M":
	case "Gi", "G":
		n <<= 10
	case "Ti", "T":
		n <<= 20
	}
	return n, nil
}

func badVolume(format string, args ...any) error {
	return errdefs.WithCode("invalid_volume", fmt.Errorf(format+": %w", append(args, errdefs.ErrInvalidArgument)...))
}

// volumeRequests maps a create's volumes onto named volumes of tenant,
// making those that do not exist where createIfNotExists (the default)
// asks it.
func (a *Adapter) volumeRequests(ctx context.Context, tenant string, in []osVolume) ([]sandbox.VolumeRequest, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if a.vols == nil {
		return nil, errdefs.WithCode("volumes_unsupported", fmt.Errorf("this service's backend has no named volumes: %w", errdefs.ErrNotImplemented))
	}
	out := make([]sandbox.VolumeRequest, 0, len(in))
	for _, v := range in {
		switch {
		case v.Host != nil || v.OSSFS != nil:
			return nil, badVolume("volume %.63q: only the pvc backend (a named volume) is served here; host paths and OSSFS are not", v.Name)
		case v.PVC == nil || v.PVC.ClaimName == "":
			return nil, badVolume("volume %.63q: pvc.claimName names the volume", v.Name)
		case v.SubPath != "":
			return nil, badVolume("volume %.63q: subPath is not supported; mount the whole volume", v.Name)
		case v.PVC.DeleteOnSandboxTermination:
			return nil, badVolume("volume %.63q: deleteOnSandboxTermination is not supported; delete the volume through /v1/volumes", v.Name)
		}
		name := v.PVC.ClaimName
		if _, err := a.vols.Get(ctx, tenant, name); errors.Is(err, errdefs.ErrNotFound) && (v.PVC.CreateIfNotExists == nil || *v.PVC.CreateIfNotExists) {
			size := int64(defaultVolumeMB)
			if v.PVC.Storage != nil && *v.PVC.Storage != "" {
				if size, err = storageMB(*v.PVC.Storage); err != nil {
					return nil, badVolume("volume %.63q: %v", v.Name, err)
				}
			}
			if _, err := a.vols.Create(ctx, tenant, name, size); err != nil && !errors.Is(err, errdefs.ErrAlreadyExists) {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
		out = append(out, sandbox.VolumeRequest{Volume: name, Path: v.MountPath, ReadOnly: v.ReadOnly})
	}
	return out, nil
}
