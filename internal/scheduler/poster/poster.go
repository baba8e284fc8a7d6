// Package poster creates API objects for the scheduler's two writes per bound
// pod — the pods/binding subresource and the Scheduled Event — with less
// machinery than client-go's rest.Request: the request URL is the REST client's
// versioned API path plus the object's path, the body is encoded by one
// protobuf codec made once, and the request goes straight to the REST client's
// transport (authentication and user agent included), not through an
// http.Client. Building a rest.Request (its URL by path.Join, its retry,
// throttling and metrics hooks, the negotiation of an encoder per call) was
// about two thirds of the CPU a bind spent in the scheduler's client.
//
// What it keeps from client-go: the same content types (protobuf, accepting
// JSON), the same retries (at most 10, when a 429 or 5xx response carries a
// Retry-After header, after waiting that many seconds), and the same errors (a
// Status in the response body becomes an *apierrors.StatusError; any other
// body a generic server response error).
package poster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Content types sent and accepted, as the scheduler's clientset is configured.
const (
	contentType = runtime.ContentTypeProtobuf
	accept      = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
)

// maxRetries is client-go's default for a request whose response says Retry-After.
const maxRetries = 10

// Poster posts objects of one API group version.
type Poster struct {
	transport http.RoundTripper
	timeout   time.Duration
	// prefix is the REST client's base URL and versioned API path, e.g.
	// https://host:6443/api/v1.
	prefix  string
	encoder runtime.Encoder
	decoder runtime.Decoder
	// sleep waits before a retry (time.Sleep honouring ctx; tests replace it).
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Poster for the REST client's group version, or an error when
// the client has no HTTP client to post with.
func New(rc *rest.RESTClient) (*Poster, error) {
	if rc == nil || rc.Client == nil {
		return nil, errors.New("poster: the REST client has no HTTP client")
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), contentType)
	if !ok {
		return nil, fmt.Errorf("poster: no serializer for %s", contentType)
	}
	transport := rc.Client.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	gv := rc.APIVersion()
	return &Poster{
		transport: transport,
		timeout:   rc.Client.Timeout,
		prefix:    rc.Post().URL().String(),
		encoder:   scheme.Codecs.EncoderForVersion(info.Serializer, gv),
		decoder:   scheme.Codecs.UniversalDeserializer(),
		sleep:     sleepCtx,
	}, nil
}

// Path is the path of a namespaced resource (and subresource, when not empty)
// below the versioned API path, as rest.Request builds it.
func Path(namespace, resource, name, subresource string) string {
	p := "/namespaces/" + namespace + "/" + resource
	if name != "" {
		p += "/" + name
	}
	if subresource != "" {
		p += "/" + subresource
	}
	return p
}

// Post creates obj at path (from Path) with a POST and, when into is not nil,
// decodes the server's response into it. gr and name describe the object in
// errors built from responses that carry no Status.
func (p *Poster) Post(ctx context.Context, path string, obj runtime.Object, into runtime.Object, gr schema.GroupResource, name string) error {
	var body bytes.Buffer
	if err := p.encoder.Encode(obj, &body); err != nil {
		return fmt.Errorf("encode %T: %w", obj, err)
	}
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	url := p.prefix + path
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body.Bytes()))
		if err != nil {
			return fmt.Errorf("post %s: %w", url, err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", accept)
		resp, err := p.transport.RoundTrip(req)
		if err != nil {
			return fmt.Errorf("post %s: %w", url, err)
		}
		code := resp.StatusCode
		if into == nil && code >= http.StatusOK && code <= http.StatusPartialContent {
			// Nothing to decode (a binding's Success): drain the body without keeping it.
			_, err := io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return fmt.Errorf("post %s: read response: %w", url, err)
			}
			return nil
		}
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return fmt.Errorf("post %s: read response: %w", url, err)
		}
		if code >= http.StatusOK && code <= http.StatusPartialContent {
			if len(data) == 0 {
				return nil
			}
			if _, _, err := p.decoder.Decode(data, nil, into); err != nil {
				return fmt.Errorf("post %s: decode response: %w", url, err)
			}
			return nil
		}
		if seconds, ok := retryAfter(resp); ok && attempt <= maxRetries {
			if err := p.sleep(ctx, time.Duration(seconds)*time.Second); err != nil {
				return fmt.Errorf("post %s: %w", url, err)
			}
			continue
		}
		return p.responseError(data, resp, gr, name)
	}
}

// retryAfter returns the seconds a 429 or 5xx response asks to wait before a
// retry, as client-go's checkWait.
func retryAfter(resp *http.Response) (int, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < http.StatusInternalServerError {
		return 0, false
	}
	h := resp.Header.Get("Retry-After")
	if h == "" {
		return 0, false
	}
	i, err := strconv.Atoi(h)
	if err != nil {
		return 0, false
	}
	return i, true
}

// responseError turns a failed response into the error client-go returns: the
// Status of the body when it holds one that is not a success, a generic server
// response error otherwise.
func (p *Poster) responseError(data []byte, resp *http.Response, gr schema.GroupResource, name string) error {
	status := &metav1.Status{}
	if obj, _, err := p.decoder.Decode(data, nil, status); err == nil {
		if st, ok := obj.(*metav1.Status); ok && st.Status != metav1.StatusSuccess {
			return &apierrors.StatusError{ErrStatus: *st}
		}
	}
	// As client-go's newUnstructuredResponseError: at most 2 KiB of a textual
	// body, "unknown" for any other; Retry-After whatever the code.
	if len(data) > maxUnstructuredResponseTextBytes {
		data = data[:maxUnstructuredResponseTextBytes]
	}
	message := "unknown"
	if isText(resp) {
		message = strings.TrimSpace(string(data))
	}
	seconds := 0
	if h := resp.Header.Get("Retry-After"); h != "" {
		seconds, _ = strconv.Atoi(h)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost, gr, name, message, seconds, true)
}

// isText reports whether the response's media type is textual (or not given).
func isText(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	media, _, err := mime.ParseMediaType(ct)
	return err == nil && strings.HasPrefix(media, "text/")
}

// maxUnstructuredResponseTextBytes is client-go's cap on an error body quoted in an error.
const maxUnstructuredResponseTextBytes = 2048

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
