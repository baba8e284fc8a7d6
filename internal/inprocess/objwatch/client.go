package objwatch

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/inprocess"
)

// maxErrorBody bounds how much of a failed watch's response is read for its Status.
const maxErrorBody = 1 << 20

// Client starts object watches through an in-process transport.
type Client struct {
	transport http.RoundTripper
	userAgent string
}

// ForConfig returns a Client when cfg reaches the API server in-process (its
// Transport is an *inprocess.Transport), and false otherwise: over the network a
// watch is a stream of encoded frames, and the caller keeps client-go's watch.
func ForConfig(cfg *rest.Config) (*Client, bool) {
	t, ok := cfg.Transport.(*inprocess.Transport)
	if !ok || t == nil {
		return nil, false
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	return &Client{transport: t, userAgent: ua}, true
}

// Watch starts a watch of the request req describes (built with a client-go REST
// client: the URL with its path and query is what client-go would send, opts.Watch
// set) and hands out events whose objects were copied with copyObj. The watch is
// authorized and served as client-go's would be; an error before it starts is the
// API server's Status as an *apierrors.StatusError, as client-go returns it.
func (c *Client) Watch(ctx context.Context, req *rest.Request, gr schema.GroupResource, copyObj CopyFunc) (watch.Interface, error) {
	u := req.URL()
	sink := NewSink(copyObj)
	wctx, cancel := context.WithCancel(ctx)
	hreq, err := http.NewRequestWithContext(NewContext(wctx, sink), http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch %s: %w", u.Path, err)
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", c.userAgent)
	resp, err := c.transport.RoundTrip(hreq)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch %s: %w", u.Path, err)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != ContentType {
		defer cancel()
		defer func() { _ = resp.Body.Close() }()
		return nil, responseError(resp, gr)
	}
	return &watcher{sink: sink, cancel: cancel, body: resp.Body}, nil
}

// responseError turns a watch request's response other than an object watch into
// the error client-go makes of it: the Status the server sent, or a generic
// response error with the status code.
func responseError(resp *http.Response, gr schema.GroupResource) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode == http.StatusOK {
		return fmt.Errorf("watch %s: the API server answered with %q, not an object watch", gr, resp.Header.Get("Content-Type"))
	}
	var st metav1.Status
	if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, &st); err == nil {
		if s, ok := obj.(*metav1.Status); ok && s.Status == metav1.StatusFailure {
			s.TypeMeta = metav1.TypeMeta{} // as client-go's decoder leaves it
			return &apierrors.StatusError{ErrStatus: *s}
		}
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, gr, "", string(data), 0, true)
}

// watcher is the client's side of an object watch.
type watcher struct {
	sink     *Sink
	cancel   context.CancelFunc
	body     io.Closer
	stopOnce sync.Once
}

// ResultChan returns the events; it is closed when the watch ends.
func (w *watcher) ResultChan() <-chan watch.Event { return w.sink.events }

// Stop ends the watch: the handler sees its context done, stops sending and closes
// the channel.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		w.cancel()
		_ = w.body.Close()
	})
}

var _ watch.Interface = (*watcher)(nil)
