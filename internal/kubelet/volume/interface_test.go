package volume_test

import (
	"github.com/kubette/kubette/internal/kubelet"
	"github.com/kubette/kubette/internal/kubelet/volume"
)

// The kubelet consumes a Manager as its VolumeManager.
var _ kubelet.VolumeManager = (*volume.Manager)(nil)
