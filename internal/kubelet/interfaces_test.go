package kubelet

import (
	critest "k8s.io/cri-api/pkg/apis/testing"
)

var (
	_ RuntimeService = (*critest.FakeRuntimeService)(nil)
	_ ImageService   = (*critest.FakeImageService)(nil)
)
