package ingress

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// AnnotationPrefix is the prefix of the annotations the controller reads.
const AnnotationPrefix = "nginx.ingress.kubette.io/"

// Annotations an Ingress may carry (all under AnnotationPrefix).
const (
	// AnnotationRewriteTarget replaces the matched path prefix with its value
	// ("/" strips it) before proxying.
	AnnotationRewriteTarget = AnnotationPrefix + "rewrite-target"
	// AnnotationSSLRedirect "false" keeps plain HTTP for TLS hosts (default
	// "true": a 308 to HTTPS).
	AnnotationSSLRedirect = AnnotationPrefix + "ssl-redirect"
	// AnnotationProxyBodySize is the largest request body (nginx size: 8m).
	AnnotationProxyBodySize = AnnotationPrefix + "proxy-body-size"
	// AnnotationProxyConnectTimeout, AnnotationProxyReadTimeout and
	// AnnotationProxySendTimeout are seconds (or an nginx time: 500ms, 2m).
	AnnotationProxyConnectTimeout = AnnotationPrefix + "proxy-connect-timeout"
	AnnotationProxyReadTimeout    = AnnotationPrefix + "proxy-read-timeout"
	AnnotationProxySendTimeout    = AnnotationPrefix + "proxy-send-timeout"
	// AnnotationSSLRedirectShort is an alias of AnnotationSSLRedirect.
	AnnotationSSLRedirectShort = "kubette.io/ssl-redirect"
)

// settings are an Ingress's parsed annotations.
type settings struct {
	rewriteTarget               string
	sslRedirect                 bool
	bodySize                    string
	connectTimeout, readTimeout string
	sendTimeout                 string
}

var (
	sizeRE    = regexp.MustCompile(`^[0-9]+[kKmMgG]?$`)
	timeRE    = regexp.MustCompile(`^[0-9]+(ms|s|m|h)?$`)
	rewriteRE = regexp.MustCompile(`^/[A-Za-z0-9._~%!*+,=:@/-]*$`)
)

// parseAnnotations validates the controller's annotations of one Ingress;
// unknown keys under the prefix are ignored, as upstream does.
func parseAnnotations(a map[string]string) (settings, error) {
	s := settings{sslRedirect: true}
	var errs []string
	if v, ok := a[AnnotationRewriteTarget]; ok {
		if !rewriteRE.MatchString(v) {
			errs = append(errs, fmt.Sprintf("%s: %q is not an absolute path of URL characters", AnnotationRewriteTarget, v))
		}
		s.rewriteTarget = v
	}
	for _, key := range []string{AnnotationSSLRedirectShort, AnnotationSSLRedirect} {
		if v, ok := a[key]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %q is not true or false", key, v))
			}
			s.sslRedirect = b
		}
	}
	if v, ok := a[AnnotationProxyBodySize]; ok {
		if !sizeRE.MatchString(v) {
			errs = append(errs, fmt.Sprintf("%s: %q is not a size (digits with an optional k, m or g)", AnnotationProxyBodySize, v))
		}
		s.bodySize = v
	}
	for _, t := range []struct {
		key string
		dst *string
	}{
		{AnnotationProxyConnectTimeout, &s.connectTimeout},
		{AnnotationProxyReadTimeout, &s.readTimeout},
		{AnnotationProxySendTimeout, &s.sendTimeout},
	} {
		v, ok := a[t.key]
		if !ok {
			continue
		}
		if !timeRE.MatchString(v) {
			errs = append(errs, fmt.Sprintf("%s: %q is not a time (seconds, or digits with ms, s, m or h)", t.key, v))
			continue
		}
		if strings.Trim(v, "0123456789") == "" {
			v += "s"
		}
		*t.dst = v
	}
	if len(errs) > 0 {
		return settings{}, fmt.Errorf("invalid annotations: %s", strings.Join(errs, "; "))
	}
	return s, nil
}
