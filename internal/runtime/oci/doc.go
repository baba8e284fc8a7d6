// Package oci turns a CRI container request into an OCI runtime spec.
//
// Spec is a pure function of its Input (the CRI ContainerConfig and PodSandboxConfig, the image
// config and the paths the runtime prepared), except that it reads /etc/passwd and /etc/group
// inside the container's rootfs to resolve user and group names, and stats the host device
// nodes the CRI config names, as containerd's CRI plugin does.
// It follows containerd's CRI plugin: Kubernetes' command/args rules over the image's
// Entrypoint/Cmd, image env overridden by CRI env, containerd's default mounts, capabilities,
// masked and read-only paths, and CRI resources on cgroup v1.
package oci
