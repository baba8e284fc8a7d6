package cluster

import "testing"

func TestDNSServiceIP(t *testing.T) {
	for _, c := range []struct{ cidr, want string }{
		{"10.96.0.0/12", "10.96.0.10"},
		{"10.150.0.0/16", "10.150.0.10"},
		{"10.150.7.9/16", "10.150.0.10"}, // host bits ignored, as the API server masks the range
		{"172.20.255.0/24", "172.20.255.10"},
		{"192.168.3.240/28", "192.168.3.250"},
	} {
		got, err := DNSServiceIP(c.cidr)
		if err != nil || got != c.want {
			t.Errorf("DNSServiceIP(%s) = %q, %v; want %s", c.cidr, got, err, c.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/29", "fd00::/108", "10.0.0.1", ""} {
		if got, err := DNSServiceIP(bad); err == nil {
			t.Errorf("DNSServiceIP(%q) = %q, want an error", bad, got)
		}
	}
}
