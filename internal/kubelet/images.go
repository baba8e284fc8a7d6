package kubelet

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pullPolicy is the container's image pull policy, defaulted as the API does when unset.
func pullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	ref := c.Image
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return v1.PullIfNotPresent
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(name, ":"); i < 0 || name[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// ensureImage makes the container's image present as its pull policy says and returns the
// image reference, or a waiting reason and message: ErrImageNeverPull, ErrImagePull, or
// ImagePullBackOff while the pull back-off holds the image.
func (k *Kubelet) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbConfig *runtimeapi.PodSandboxConfig) (ref, reason, message string) {
	fp := fieldPath(pod, c)
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	if c.Image == "" {
		return "", "InvalidImageName", "Failed to apply default image tag \"\": couldn't parse image name \"\": invalid reference format"
	}
	st, err := k.cfg.Images.ImageStatus(ctx, spec, false)
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %s", c.Image, criMessage(err))
		k.event(pod, fp, v1.EventTypeWarning, "InspectFailed", msg)
		return "", "ImageInspectError", msg
	}
	present := st.GetImage() != nil
	policy := pullPolicy(c)
	if present && policy != v1.PullAlways {
		k.event(pod, fp, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
		return st.Image.Id, "", ""
	}
	if policy == v1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		k.event(pod, fp, v1.EventTypeWarning, reasonErrImageNeverPull, msg)
		return "", reasonErrImageNeverPull, msg
	}
	key := string(pod.UID) + "/" + c.Image
	if k.pullBackoff.IsInBackOffSinceUpdate(key, k.clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		k.event(pod, fp, v1.EventTypeNormal, "BackOff", msg)
		k.triggerAfter(pod.UID, k.pullBackoff.Get(key))
		return "", reasonImagePullBackOff, msg
	}
	k.event(pod, fp, v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	start := k.clock.Now()
	ref, err = k.pull(ctx, pod, spec, sbConfig)
	if err != nil {
		k.pullBackoff.Next(key, k.clock.Now())
		k.event(pod, fp, v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %s", c.Image, criMessage(err)))
		k.event(pod, fp, v1.EventTypeWarning, "Failed", "Error: "+reasonErrImagePull)
		k.triggerAfter(pod.UID, k.pullBackoff.Get(key))
		return "", reasonErrImagePull, criMessage(err)
	}
	took := k.clock.Since(start).Truncate(time.Millisecond)
	var size uint64
	if st, err := k.cfg.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err == nil && st.GetImage() != nil {
		size = st.Image.Size
	}
	k.event(pod, fp, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", c.Image, took, took, size))
	return ref, "", ""
}

// pull pulls with each matching pull secret's credentials in turn (anonymously when none
// match) and returns the first success or the last error.
func (k *Kubelet) pull(ctx context.Context, pod *v1.Pod, spec *runtimeapi.ImageSpec, sbConfig *runtimeapi.PodSandboxConfig) (string, error) {
	auths := k.pullAuths(ctx, pod, spec.Image)
	if len(auths) == 0 {
		return k.cfg.Images.PullImage(ctx, spec, nil, sbConfig)
	}
	var err error
	for _, a := range auths {
		var ref string
		if ref, err = k.cfg.Images.PullImage(ctx, spec, a, sbConfig); err == nil {
			return ref, nil
		}
	}
	return "", err
}
