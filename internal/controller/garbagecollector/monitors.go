package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
)

// ignored reports whether a resource is never monitored, as upstream: events have no
// owners worth tracking and churn a lot.
func ignored(gr schema.GroupResource) bool {
	return gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io")
}

// monitor is the garbage collector's event handler on one resource's shared metadata informer.
type monitor struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// deletableResources lists the preferred version of every resource that supports list,
// watch and delete, skipping subresources and ignored resources. On a partial discovery
// failure it returns what it found along with the error.
func deletableResources(ctx context.Context, d discovery.ServerResourcesInterface) (map[schema.GroupVersionResource]struct{}, error) {
	lists, err := discovery.ToServerResourcesInterfaceWithContext(d).ServerPreferredResourcesWithContext(ctx)
	out := make(map[schema.GroupVersionResource]struct{})
	if lists == nil {
		if err == nil {
			err = errors.New("discovery returned no resources")
		}
		return out, fmt.Errorf("discover preferred resources: %w", err)
	}
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists) {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || ignored(gv.WithResource(r.Name).GroupResource()) {
				continue
			}
			out[gv.WithResource(r.Name)] = struct{}{}
		}
	}
	if err != nil {
		return out, fmt.Errorf("discover preferred resources: %w", err)
	}
	return out, nil
}

// syncMonitors makes the monitored set equal to resources: it registers the graph
// builder's handlers on the shared metadata informer of each new resource, removes them
// from resources no longer served, and starts informers not yet running. It tries every
// resource and returns the joined errors.
func (c *Controller) syncMonitors(ctx context.Context, resources map[schema.GroupVersionResource]struct{}) error {
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	var errs []error
	added, removed := 0, 0
	for gvr := range resources {
		if _, ok := c.monitors[gvr]; ok {
			continue
		}
		gvk, err := c.mapper.KindFor(gvr)
		if err != nil {
			errs = append(errs, fmt.Errorf("look up kind of %s: %w", gvr, err))
			continue
		}
		inf := c.metadataInformers.ForResource(gvr).Informer()
		reg, err := inf.AddEventHandler(c.builder.handlers(gvk))
		if err != nil {
			errs = append(errs, fmt.Errorf("watch %s: %w", gvr, err))
			continue
		}
		c.monitors[gvr] = &monitor{informer: inf, registration: reg}
		added++
	}
	for gvr, m := range c.monitors {
		if _, ok := resources[gvr]; ok {
			continue
		}
		if err := m.informer.RemoveEventHandler(m.registration); err != nil {
			errs = append(errs, fmt.Errorf("stop watching %s: %w", gvr, err))
		}
		delete(c.monitors, gvr)
		removed++
	}
	c.metadataInformers.Start(ctx.Done())
	c.log.Debug("synced monitors", "added", added, "removed", removed, "total", len(c.monitors))
	return errors.Join(errs...)
}

// stopMonitors removes every handler registration (the shared informers keep running for
// their other users until their own stop).
func (c *Controller) stopMonitors() {
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	for gvr, m := range c.monitors {
		_ = m.informer.RemoveEventHandler(m.registration)
		delete(c.monitors, gvr)
	}
}

// monitorsSynced reports whether there is at least one monitor and every monitor has
// delivered its informer's initial list to the graph builder.
func (c *Controller) monitorsSynced() bool {
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	if len(c.monitors) == 0 {
		return false
	}
	for _, m := range c.monitors {
		if !m.registration.HasSynced() {
			return false
		}
	}
	return true
}

// resourceSynced reports whether gvr is monitored and synced.
func (c *Controller) resourceSynced(gvr schema.GroupVersionResource) bool {
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	m, ok := c.monitors[gvr]
	return ok && m.registration.HasSynced()
}

// resync discovers the deletable resources and, when they changed since last time,
// resets the REST mapper and re-syncs the monitors. last is the set of the previous
// successful resync; the new set is returned.
func (c *Controller) resync(ctx context.Context, last map[schema.GroupVersionResource]struct{}) map[schema.GroupVersionResource]struct{} {
	if cached, ok := c.discovery.(discovery.CachedDiscoveryInterface); ok {
		// The shared discovery cache never expires by itself.
		discovery.ToCachedDiscoveryInterfaceWithContext(cached).InvalidateWithContext(ctx)
	}
	current, err := deletableResources(ctx, c.discovery)
	if len(current) == 0 {
		c.log.Warn("no deletable resources discovered; keeping monitors", "err", err)
		return last
	}
	if failed, ok := discovery.GroupDiscoveryFailedErrorGroups(err); ok {
		// Keep watching synced resources of groups that failed this time.
		c.log.Warn("discovery failed for some groups", "groups", fmt.Sprint(failed))
		for gvr := range last {
			if _, bad := failed[gvr.GroupVersion()]; bad && c.resourceSynced(gvr) {
				current[gvr] = struct{}{}
			}
		}
	} else if err != nil {
		c.log.Warn("discovery failed", "err", err)
	}
	if maps.Equal(last, current) {
		return last
	}
	c.mapper.Reset()
	if err := c.syncMonitors(ctx, current); err != nil {
		c.log.Error("failed to sync monitors; will retry", "err", err)
		return last
	}
	c.log.Info("monitoring resources", "count", len(current))
	return current
}
