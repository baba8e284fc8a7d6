package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// toCRIImage renders an image for CRI: a numeric User becomes uid, a name becomes username.
func toCRIImage(img Image) *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id: img.ID, RepoTags: img.RepoTags, RepoDigests: img.RepoDigests, Size: img.Size,
		Spec: &runtimeapi.ImageSpec{Image: img.ID},
	}
	user, _, _ := strings.Cut(img.Config.User, ":")
	if n, err := strconv.ParseInt(user, 10, 64); err == nil {
		out.Uid = &runtimeapi.Int64Value{Value: n}
	} else {
		out.Username = user
	}
	return out
}

// ListImages lists the images, all or those the filter's image reference names.
func (s *Server) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	resp := &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{}}
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		img, err := s.cfg.Images.Get(ref)
		if errors.Is(err, ErrImageNotFound) {
			return resp, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list images %q: %w", ref, err)
		}
		resp.Images = append(resp.Images, toCRIImage(img))
		return resp, nil
	}
	for _, img := range s.cfg.Images.List() {
		resp.Images = append(resp.Images, toCRIImage(img))
	}
	return resp, nil
}

// ImageStatus reports an image; an absent image is a nil image, not an error, as CRI wants.
func (s *Server) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "image status: no image given")
	}
	img, err := s.cfg.Images.Get(ref)
	if errors.Is(err, ErrImageNotFound) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image status %q: %w", ref, err)
	}
	resp := &runtimeapi.ImageStatusResponse{Image: toCRIImage(img)}
	if req.GetVerbose() {
		b, err := json.Marshal(struct {
			ID     string              `json:"id"`
			Config ocispec.ImageConfig `json:"config"`
		}{img.ID, img.Config})
		if err != nil {
			return nil, fmt.Errorf("image status %q: %w", ref, err)
		}
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// PullImage pulls an image with the request's credentials, over plain HTTP or without
// verifying certificates when its registry is in Config.InsecureRegistries; the registry's
// error text is kept.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "pull: no image given")
	}
	var opts PullOptions
	if s.cfg.InsecureRegistries.Len() > 0 {
		opts.Insecure = s.cfg.InsecureRegistries.Match
	}
	if a := req.GetAuth(); a != nil {
		opts.Auth = &Auth{Username: a.GetUsername(), Password: a.GetPassword(), Auth: a.GetAuth(),
			IdentityToken: a.GetIdentityToken(), RegistryToken: a.GetRegistryToken()}
	}
	start := time.Now()
	img, err := s.cfg.Images.Pull(ctx, ref, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to pull image %q: %w", ref, err)
	}
	s.log.Info("image pulled", "ref", ref, "id", img.ID, "took", time.Since(start))
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

// RemoveImage removes an image; removing an absent image is not an error.
func (s *Server) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "remove image: no image given")
	}
	if err := s.cfg.Images.Remove(ref); err != nil && !errors.Is(err, ErrImageNotFound) {
		return nil, fmt.Errorf("failed to remove image %q: %w", ref, err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the image store's usage.
func (s *Server) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	used, inodes, err := s.cfg.Images.Usage()
	if err != nil {
		return nil, fmt.Errorf("image filesystem usage: %w", err)
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp: time.Now().UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: s.cfg.ImageDir},
		UsedBytes: &runtimeapi.UInt64Value{Value: used}, InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}}}, nil
}
