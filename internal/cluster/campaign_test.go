package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
)

func TestCampaignRunsAgainUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	campaign(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func(ctx context.Context) error {
		calls++
		if calls == 3 {
			cancel()
			<-ctx.Done()
			return nil
		}
		return errors.New("lost the lease kube-system/kube-scheduler")
	})
	if calls != 3 {
		t.Fatalf("run called %d times, want 3 (two lost leases, then led until cancelled)", calls)
	}
}
