package hostaddr

import "testing"

func TestDefaultRouteInterface(t *testing.T) {
	routes := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	if got, err := defaultRouteInterface([]byte(routes)); err != nil || got != "eth0" {
		t.Fatalf("got %q %v, want eth0", got, err)
	}
	if _, err := defaultRouteInterface([]byte("Iface\tDestination\n")); err == nil {
		t.Fatal("no default route: no error")
	}
}

func TestDefaultRouteIPv4OfThisMachine(t *testing.T) {
	addr, err := DefaultRouteIPv4()
	if err != nil {
		t.Skipf("this machine has no IPv4 default route: %v", err)
	}
	if !addr.Is4() || addr.IsUnspecified() {
		t.Errorf("DefaultRouteIPv4 = %v, want an IPv4 address", addr)
	}
}
