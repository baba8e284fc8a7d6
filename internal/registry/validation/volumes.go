package validation

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// validateVolumes validates the pod volumes and returns the valid ones by name
// (volume mounts may only reference those). podName is empty for templates.
func validateVolumes(volumes []corev1.Volume, podName string, fldPath *field.Path, isPod bool) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	createdPVCs := map[string]bool{}
	if podName != "" {
		for _, v := range volumes {
			if v.Ephemeral != nil {
				createdPVCs[podName+"-"+v.Name] = true
			}
		}
	}
	vols := make(map[string]corev1.VolumeSource, len(volumes))
	for i := range volumes {
		v := &volumes[i]
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		el := validateVolumeSource(&v.VolumeSource, idxPath, v.Name, podName, isPod)
		if v.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, validateDNS1123Label(v.Name, namePath)...)
		}
		if names[v.Name] {
			el = append(el, field.Duplicate(namePath, v.Name))
		}
		if len(el) == 0 {
			names[v.Name] = true
			vols[v.Name] = v.VolumeSource
		} else {
			errs = append(errs, el...)
		}
		if v.PersistentVolumeClaim != nil && createdPVCs[v.PersistentVolumeClaim.ClaimName] {
			errs = append(errs, field.Invalid(idxPath.Child("persistentVolumeClaim", "claimName"), v.PersistentVolumeClaim.ClaimName, "must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return vols, errs
}

func required(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return nil
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

// validateVolumeSource requires exactly one volume source and validates it.
func validateVolumeSource(vs *corev1.VolumeSource, fldPath *field.Path, volName, podName string, isPod bool) field.ErrorList {
	var errs field.ErrorList
	n := 0
	add := func(name string, set bool, validate func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
			return
		}
		n++
		if validate != nil {
			errs = append(errs, validate(fldPath.Child(name))...)
		}
	}
	add("emptyDir", vs.EmptyDir != nil, func(p *field.Path) field.ErrorList {
		if vs.EmptyDir.SizeLimit != nil && quantityIsNegative(*vs.EmptyDir.SizeLimit) {
			return field.ErrorList{field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity")}
		}
		return nil
	})
	add("hostPath", vs.HostPath != nil, func(p *field.Path) field.ErrorList {
		if vs.HostPath.Path == "" {
			return field.ErrorList{field.Required(p.Child("path"), "")}
		}
		errs := validatePathNoBacksteps(vs.HostPath.Path, p.Child("path"))
		if t := vs.HostPath.Type; t != nil {
			switch *t {
			case corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
				corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev:
			default:
				errs = append(errs, field.NotSupported(p.Child("type"), t, []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathBlockDev, corev1.HostPathCharDev,
					corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate, corev1.HostPathFile, corev1.HostPathFileOrCreate, corev1.HostPathSocket}))
			}
		}
		return errs
	})
	add("gitRepo", vs.GitRepo != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.GitRepo.Repository, p.Child("repository"))
		return append(errs, validateLocalDescendingPath(vs.GitRepo.Directory, p.Child("directory"))...)
	})
	add("gcePersistentDisk", vs.GCEPersistentDisk != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.GCEPersistentDisk.PDName, p.Child("pdName"))
		if vs.GCEPersistentDisk.Partition < 0 || vs.GCEPersistentDisk.Partition > 255 {
			errs = append(errs, field.Invalid(p.Child("partition"), vs.GCEPersistentDisk.Partition, validation.InclusiveRangeError(1, 255)))
		}
		return errs
	})
	add("awsElasticBlockStore", vs.AWSElasticBlockStore != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.AWSElasticBlockStore.VolumeID, p.Child("volumeID"))
		if vs.AWSElasticBlockStore.Partition < 0 || vs.AWSElasticBlockStore.Partition > 255 {
			errs = append(errs, field.Invalid(p.Child("partition"), vs.AWSElasticBlockStore.Partition, validation.InclusiveRangeError(1, 255)))
		}
		return errs
	})
	add("secret", vs.Secret != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.Secret.SecretName, p.Child("secretName"))
		errs = append(errs, validateFileMode(vs.Secret.DefaultMode, p.Child("defaultMode"))...)
		for i := range vs.Secret.Items {
			errs = append(errs, validateKeyToPath(&vs.Secret.Items[i], p.Child("items").Index(i))...)
		}
		return errs
	})
	add("nfs", vs.NFS != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.NFS.Server, p.Child("server"))
		errs = append(errs, required(vs.NFS.Path, p.Child("path"))...)
		if !path.IsAbs(vs.NFS.Path) {
			errs = append(errs, field.Invalid(p.Child("path"), vs.NFS.Path, "must be an absolute path"))
		}
		return errs
	})
	add("iscsi", vs.ISCSI != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.ISCSI.TargetPortal, p.Child("targetPortal"))
		errs = append(errs, required(vs.ISCSI.IQN, p.Child("iqn"))...)
		if vs.ISCSI.Lun < 0 || vs.ISCSI.Lun > 255 {
			errs = append(errs, field.Invalid(p.Child("lun"), vs.ISCSI.Lun, validation.InclusiveRangeError(0, 255)))
		}
		if (vs.ISCSI.DiscoveryCHAPAuth || vs.ISCSI.SessionCHAPAuth) && vs.ISCSI.SecretRef == nil {
			errs = append(errs, field.Required(p.Child("secretRef"), ""))
		}
		return errs
	})
	add("glusterfs", vs.Glusterfs != nil, func(p *field.Path) field.ErrorList {
		return append(required(vs.Glusterfs.EndpointsName, p.Child("endpoints")), required(vs.Glusterfs.Path, p.Child("path"))...)
	})
	add("flocker", vs.Flocker != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if vs.Flocker.DatasetName == "" && vs.Flocker.DatasetUUID == "" {
			errs = append(errs, field.Required(p, "one of datasetName and datasetUUID is required"))
		}
		if vs.Flocker.DatasetName != "" && vs.Flocker.DatasetUUID != "" {
			errs = append(errs, field.Invalid(p, "resource", "datasetName and datasetUUID can not be specified simultaneously"))
		}
		if strings.Contains(vs.Flocker.DatasetName, "/") {
			errs = append(errs, field.Invalid(p.Child("datasetName"), vs.Flocker.DatasetName, "must not contain '/'"))
		}
		return errs
	})
	add("persistentVolumeClaim", vs.PersistentVolumeClaim != nil, func(p *field.Path) field.ErrorList {
		return required(vs.PersistentVolumeClaim.ClaimName, p.Child("claimName"))
	})
	add("rbd", vs.RBD != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if len(vs.RBD.CephMonitors) == 0 {
			errs = append(errs, field.Required(p.Child("monitors"), ""))
		}
		return append(errs, required(vs.RBD.RBDImage, p.Child("image"))...)
	})
	add("cinder", vs.Cinder != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.Cinder.VolumeID, p.Child("volumeID"))
		if vs.Cinder.SecretRef != nil {
			errs = append(errs, required(vs.Cinder.SecretRef.Name, p.Child("secretRef", "name"))...)
		}
		return errs
	})
	add("cephfs", vs.CephFS != nil, func(p *field.Path) field.ErrorList {
		if len(vs.CephFS.Monitors) == 0 {
			return field.ErrorList{field.Required(p.Child("monitors"), "")}
		}
		return nil
	})
	add("quobyte", vs.Quobyte != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if vs.Quobyte.Registry == "" {
			errs = append(errs, field.Required(p.Child("registry"), "must be a host:port pair or multiple pairs separated by commas"))
		}
		return append(errs, required(vs.Quobyte.Volume, p.Child("volume"))...)
	})
	add("downwardAPI", vs.DownwardAPI != nil, func(p *field.Path) field.ErrorList {
		errs := validateFileMode(vs.DownwardAPI.DefaultMode, p.Child("defaultMode"))
		for i := range vs.DownwardAPI.Items {
			errs = append(errs, validateDownwardAPIVolumeFile(&vs.DownwardAPI.Items[i], p)...)
		}
		return errs
	})
	add("fc", vs.FC != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if len(vs.FC.TargetWWNs) < 1 && len(vs.FC.WWIDs) < 1 {
			errs = append(errs, field.Required(p.Child("targetWWNs"), "must specify either targetWWNs or wwids, but not both"))
		}
		if len(vs.FC.TargetWWNs) != 0 && len(vs.FC.WWIDs) != 0 {
			errs = append(errs, field.Invalid(p.Child("targetWWNs"), vs.FC.TargetWWNs, "targetWWNs and wwids can not be specified simultaneously"))
		}
		if len(vs.FC.TargetWWNs) != 0 {
			if vs.FC.Lun == nil {
				errs = append(errs, field.Required(p.Child("lun"), "lun is required if targetWWNs is specified"))
			} else if *vs.FC.Lun < 0 || *vs.FC.Lun > 255 {
				errs = append(errs, field.Invalid(p.Child("lun"), vs.FC.Lun, validation.InclusiveRangeError(0, 255)))
			}
		}
		return errs
	})
	add("flexVolume", vs.FlexVolume != nil, func(p *field.Path) field.ErrorList {
		return required(vs.FlexVolume.Driver, p.Child("driver"))
	})
	add("configMap", vs.ConfigMap != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.ConfigMap.Name, p.Child("name"))
		errs = append(errs, validateFileMode(vs.ConfigMap.DefaultMode, p.Child("defaultMode"))...)
		for i := range vs.ConfigMap.Items {
			errs = append(errs, validateKeyToPath(&vs.ConfigMap.Items[i], p.Child("items").Index(i))...)
		}
		return errs
	})
	add("azureFile", vs.AzureFile != nil, func(p *field.Path) field.ErrorList {
		return append(required(vs.AzureFile.SecretName, p.Child("secretName")), required(vs.AzureFile.ShareName, p.Child("shareName"))...)
	})
	add("vsphereVolume", vs.VsphereVolume != nil, func(p *field.Path) field.ErrorList {
		return required(vs.VsphereVolume.VolumePath, p.Child("volumePath"))
	})
	add("photonPersistentDisk", vs.PhotonPersistentDisk != nil, func(p *field.Path) field.ErrorList {
		return required(vs.PhotonPersistentDisk.PdID, p.Child("pdID"))
	})
	add("portworxVolume", vs.PortworxVolume != nil, func(p *field.Path) field.ErrorList {
		return required(vs.PortworxVolume.VolumeID, p.Child("volumeID"))
	})
	add("azureDisk", vs.AzureDisk != nil, func(p *field.Path) field.ErrorList {
		return append(required(vs.AzureDisk.DiskName, p.Child("diskName")), required(vs.AzureDisk.DataDiskURI, p.Child("diskURI"))...)
	})
	add("storageos", vs.StorageOS != nil, func(p *field.Path) field.ErrorList {
		return required(vs.StorageOS.VolumeName, p.Child("volumeName"))
	})
	add("projected", vs.Projected != nil, func(p *field.Path) field.ErrorList {
		return validateProjectedVolumeSource(vs.Projected, p)
	})
	add("scaleIO", vs.ScaleIO != nil, func(p *field.Path) field.ErrorList {
		errs := required(vs.ScaleIO.Gateway, p.Child("gateway"))
		errs = append(errs, required(vs.ScaleIO.System, p.Child("system"))...)
		if vs.ScaleIO.SecretRef == nil {
			errs = append(errs, field.Required(p.Child("secretRef"), ""))
		}
		return errs
	})
	add("csi", vs.CSI != nil, func(p *field.Path) field.ErrorList {
		if vs.CSI.Driver == "" {
			return field.ErrorList{field.Required(p.Child("driver"), "")}
		}
		return nil
	})
	add("ephemeral", vs.Ephemeral != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		tmpl := vs.Ephemeral.VolumeClaimTemplate
		if tmpl == nil {
			return field.ErrorList{field.Required(p.Child("volumeClaimTemplate"), "")}
		}
		tPath := p.Child("volumeClaimTemplate")
		errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, tPath.Child("metadata", "labels"))...)
		errs = append(errs, apimachineryvalidation.ValidateAnnotations(tmpl.Annotations, tPath.Child("metadata", "annotations"))...)
		specPath := tPath.Child("spec")
		if len(tmpl.Spec.AccessModes) == 0 {
			errs = append(errs, field.Required(specPath.Child("accessModes"), "at least 1 access mode is required"))
		}
		if _, ok := tmpl.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			errs = append(errs, field.Required(specPath.Child("resources").Key(string(corev1.ResourceStorage)), ""))
		}
		if podName != "" && volName != "" {
			pvcName := podName + "-" + volName
			for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(pvcName, false) {
				errs = append(errs, field.Invalid(fldPath.Child("name"), volName, fmt.Sprintf("PVC name %q: %v", pvcName, msg)))
			}
		}
		return errs
	})
	add("image", vs.Image != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if isPod && vs.Image.Reference == "" {
			errs = append(errs, field.Required(p.Child("reference"), ""))
		}
		return append(errs, validatePullPolicy(vs.Image.PullPolicy, p.Child("pullPolicy"))...)
	})
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

func validateKeyToPath(kp *corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	errs := required(kp.Key, fldPath.Child("key"))
	errs = append(errs, required(kp.Path, fldPath.Child("path"))...)
	errs = append(errs, validateLocalNonReservedPath(kp.Path, fldPath.Child("path"))...)
	return append(errs, validateFileMode(kp.Mode, fldPath.Child("mode"))...)
}

func validateDownwardAPIVolumeFile(file *corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	errs := required(file.Path, fldPath.Child("path"))
	errs = append(errs, validateLocalNonReservedPath(file.Path, fldPath.Child("path"))...)
	switch {
	case file.FieldRef != nil:
		errs = append(errs, validateObjectFieldSelector(file.FieldRef, validVolumeFieldPaths(), fldPath.Child("fieldRef"))...)
		if file.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(fldPath, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case file.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldSelector(file.ResourceFieldRef, true, fldPath.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(fldPath, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, validateFileMode(file.Mode, fldPath.Child("mode"))...)
}

func validateProjectedVolumeSource(pv *corev1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	errs := validateFileMode(pv.DefaultMode, fldPath.Child("defaultMode"))
	paths := map[string]bool{}
	addPath := func(p, name string) {
		if p == "" {
			return
		}
		if paths[p] {
			errs = append(errs, field.Invalid(fldPath, name, "conflicting duplicate paths"))
		}
		paths[p] = true
	}
	for i, src := range pv.Sources {
		n := 0
		srcPath := fldPath.Child("sources").Index(i)
		if src.Secret != nil {
			n++
			p := srcPath.Child("secret")
			errs = append(errs, required(src.Secret.Name, p.Child("name"))...)
			for j := range src.Secret.Items {
				errs = append(errs, validateKeyToPath(&src.Secret.Items[j], p.Child("items").Index(j))...)
				addPath(src.Secret.Items[j].Path, src.Secret.Name)
			}
		}
		if src.ConfigMap != nil {
			n++
			p := srcPath.Child("configMap")
			errs = append(errs, required(src.ConfigMap.Name, p.Child("name"))...)
			for j := range src.ConfigMap.Items {
				errs = append(errs, validateKeyToPath(&src.ConfigMap.Items[j], p.Child("items").Index(j))...)
				addPath(src.ConfigMap.Items[j].Path, src.ConfigMap.Name)
			}
		}
		if src.DownwardAPI != nil {
			n++
			p := srcPath.Child("downwardAPI")
			for j := range src.DownwardAPI.Items {
				errs = append(errs, validateDownwardAPIVolumeFile(&src.DownwardAPI.Items[j], p)...)
				addPath(src.DownwardAPI.Items[j].Path, src.DownwardAPI.Items[j].Path)
			}
		}
		if src.ServiceAccountToken != nil {
			n++
			p := srcPath.Child("serviceAccountToken")
			if exp := src.ServiceAccountToken.ExpirationSeconds; exp != nil {
				if *exp < 10*60 {
					errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *exp, "may not specify a duration less than 10 minutes"))
				}
				if *exp > 1<<32 {
					errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *exp, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			if src.ServiceAccountToken.Path == "" {
				errs = append(errs, field.Required(fldPath.Child("path"), ""))
			} else {
				errs = append(errs, validateLocalNonReservedPath(src.ServiceAccountToken.Path, fldPath.Child("path"))...)
			}
		}
		if src.ClusterTrustBundle != nil {
			n++
			p := srcPath.Child("clusterTrustBundle")
			ctb := src.ClusterTrustBundle
			switch {
			case ctb.Name != nil && ctb.SignerName != nil:
				errs = append(errs, field.Invalid(p, ctb, "only one of name and signerName may be used"))
			case ctb.Name == nil && ctb.SignerName == nil:
				errs = append(errs, field.Required(p, "either name or signerName must be specified"))
			}
			errs = append(errs, required(ctb.Path, p.Child("path"))...)
			errs = append(errs, validateLocalNonReservedPath(ctb.Path, p.Child("path"))...)
			addPath(ctb.Path, ctb.Path)
		}
		if src.PodCertificate != nil {
			n++
			p := srcPath.Child("podCertificate")
			errs = append(errs, required(src.PodCertificate.SignerName, p.Child("signerName"))...)
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(srcPath, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}
