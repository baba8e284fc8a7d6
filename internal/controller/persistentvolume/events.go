package persistentvolume

// The reasons of the controller's events, as upstream's pkg/controller/volume/events.
const (
	reasonFailedBinding        = "FailedBinding"
	reasonVolumeMismatch       = "VolumeMismatch"
	reasonVolumeFailedRecycle  = "VolumeFailedRecycle"
	reasonVolumeFailedDelete   = "VolumeFailedDelete"
	reasonExternalProvisioning = "ExternalProvisioning"
	reasonProvisioningFailed   = "ProvisioningFailed"
	reasonWaitForFirstConsumer = "WaitForFirstConsumer"
	reasonWaitForPodScheduled  = "WaitForPodScheduled"
	reasonClaimLost            = "ClaimLost"
	reasonClaimMisbound        = "ClaimMisbound"
	reasonUnknownReclaimPolicy = "VolumeUnknownReclaimPolicy"
)

// The messages of the events whose text does not depend on the objects, as upstream's.
const (
	msgNoClassNoVolume   = "no persistent volumes available for this claim and no storage class is set"
	msgWaitFirstConsumer = "waiting for first consumer to be created before binding"
	msgLostReference     = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
	msgLostVolume        = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
	msgMisbound          = "Two claims are bound to the same volume, this one is bound incorrectly"
	msgNoRecycler        = "No recycler plugin found for the volume!"
	msgUnknownPolicy     = "Volume has unrecognized PersistentVolumeReclaimPolicy"
)
