package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

// Labels of a volume's PersistentVolumeClaim (every one, also those a
// label value cannot hold, is in labelsAnnotation too).
const (
	labelVolume     = "dev.genesis.volume"      // volume id
	labelVolumeName = "dev.genesis.volume-name" // the tenant's name for it
	labelTenant     = "dev.genesis.tenant"      // tenant id
)

// Annotations that mark a cluster's default StorageClass (the GA one and
// the beta one some clusters still set).
var defaultClassAnnotations = []string{"storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"}

var _ driver.VolumeProvisioner = (*Driver)(nil)

// claimName is the PersistentVolumeClaim of volume id.
func claimName(id string) string { return objectName("genesis-" + id) }

// claimVolume is the Pod volume (and mount name) of volume id.
func claimVolume(id string) string { return objectName("vol-" + id) }

// storageClass is the StorageClass new claims name: the configured one
// if the cluster has it, else the cluster's default. "" and a reason when
// there is none, which makes volumes unavailable (501) rather than claims
// that never bind.
func (d *Driver) storageClass(ctx context.Context) (string, string, error) {
	classes := d.cs.StorageV1().StorageClasses()
	if name := d.cfg.StorageClass; name != "" {
		if _, err := classes.Get(ctx, name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return "", fmt.Sprintf("the cluster has no StorageClass %q (kubernetes.storage_class)", name), nil
			}
			return "", "", apiErr("get storage class "+name, err)
		}
		return name, "", nil
	}
	l, err := classes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", apiErr("list storage classes", err)
	}
	if name := defaultClass(l.Items); name != "" {
		return name, "", nil
	}
	return "", "the cluster has no default StorageClass and kubernetes.storage_class names none", nil
}

// defaultClass is the name of the default class among l ("" when none);
// of several, the first by name, as the API server picks one too.
func defaultClass(l []storagev1.StorageClass) string {
	var names []string
	for _, c := range l {
		if slices.ContainsFunc(defaultClassAnnotations, func(a string) bool { return c.Annotations[a] == "true" }) {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// VolumesAvailable says whether the cluster offers a StorageClass for
// volumes' claims.
func (d *Driver) VolumesAvailable(ctx context.Context) (bool, string) {
	name, why, err := d.storageClass(ctx)
	if err != nil {
		return false, err.Error()
	}
	return name != "", why
}

// CreateVolume makes volume spec's PersistentVolumeClaim: of the
// StorageClass the cluster offers, ReadWriteOnce, requesting spec.SizeMB
// MiB, labelled with the volume and its tenant. A claim of the same volume
// that exists already is taken as made (a retry).
func (d *Driver) CreateVolume(ctx context.Context, spec driver.VolumeSpec) error {
	if spec.ID == "" || spec.SizeMB < 1 {
		return errdefs.Invalid("kube: a volume needs an id and a size")
	}
	class, why, err := d.storageClass(ctx)
	if err != nil {
		return err
	}
	if class == "" {
		return errdefs.WithCode("volumes_unavailable", fmt.Errorf("kube: volumes are unavailable: %s: %w", why, errdefs.ErrNotImplemented))
	}
	labels := map[string]string{driver.LabelManaged: "true", labelVolume: spec.ID, labelVolumeName: spec.Name, labelTenant: spec.Tenant}
	all, err := json.Marshal(labels)
	if err != nil {
		return err
	}
	kept := map[string]string{}
	for k, v := range labels {
		if len(validation.IsValidLabelValue(v)) == 0 {
			kept[k] = v
		}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claimName(spec.ID), Namespace: d.cfg.Namespace, Labels: kept,
			Annotations: map[string]string{labelsAnnotation: string(all)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(spec.SizeMB<<20, resource.BinarySI)}},
		},
	}
	_, err = d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, gerr := d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if gerr != nil {
			return apiErr("get volume claim "+pvc.Name, gerr)
		}
		if old.Labels[labelVolume] != spec.ID {
			return fmt.Errorf("kube: claim %s exists and is not volume %s's: %w", pvc.Name, spec.ID, errdefs.ErrAlreadyExists)
		}
		return nil
	}
	if err != nil {
		return apiErr("create volume claim "+pvc.Name, err)
	}
	return nil
}

// RemoveVolume deletes volume id's claim; what happens to its data is
// the StorageClass's reclaim policy (Delete, the default of dynamic
// provisioners, removes it).
func (d *Driver) RemoveVolume(ctx context.Context, id string) error {
	name := claimName(id)
	err := d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete volume claim "+name, err)
	}
	return nil
}

// claimMounts turns the provisioned volumes of mounts into the Pod's
// volumes and the container's mounts. A host bind mount (Source) is
// refused: a Pod has no path on the service's host.
func claimMounts(mounts []driver.Mount) ([]corev1.Volume, []corev1.VolumeMount, error) {
	var vols []corev1.Volume
	var vms []corev1.VolumeMount
	for _, m := range mounts {
		if m.Volume == "" {
			return nil, nil, fmt.Errorf("kube: host bind mounts (%s) are not available to Pods: %w", m.Target, errdefs.ErrNotImplemented)
		}
		name := claimVolume(m.Volume)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(m.Volume), ReadOnly: m.ReadOnly}}})
		vms = append(vms, corev1.VolumeMount{Name: name, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	return vols, vms, nil
}
