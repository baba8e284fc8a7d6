package iptables

import (
	"testing"
)

// The save forms below are what iptables v1.8.9 (nf_tables) printed for
// these rules after iptables-restore (TestSaveFormMatchesIptables checks the
// renderer's whole vocabulary against the real tools).
func TestSaveForm(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		{`-m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL`,
			`-d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL`},
		{`-m comment --comment "kube-system/dns:dns cluster IP" -m udp -p udp -d 10.96.0.53 --dport 53 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ`,
			`! -s 10.244.0.0/16 -d 10.96.0.53/32 -p udp -m comment --comment "kube-system/dns:dns cluster IP" -m udp --dport 53 -j KUBE-MARK-MASQ`},
		{`-m comment --comment default/web:http -s 10.244.1.5 -j KUBE-MARK-MASQ`,
			`-s 10.244.1.5/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`},
		{`-m comment --comment default/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.1.5:8080`,
			`-p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.5:8080`},
		{`-m comment --comment a/b:c -m recent --name KUBE-SEP-AB --set -m tcp -p tcp -j DNAT --to-destination 10.1.1.1:80`,
			`-p tcp -m comment --comment "a/b:c" -m recent --set --name KUBE-SEP-AB --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.1.1.1:80`},
		{`-m comment --comment "a -> b" -m recent --name KUBE-SEP-AB --rcheck --seconds 10800 --reap -j KUBE-SEP-AB`,
			`-m comment --comment "a -> b" -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-AB --mask 255.255.255.255 --rsource -j KUBE-SEP-AB`},
		{`-m comment --comment "a -> b" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-X`,
			`-m comment --comment "a -> b" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-X`},
		{`-m statistic --mode random --probability 0.1428571429 -j KUBE-SEP-X`, `-m statistic --mode random --probability 0.14285714272 -j KUBE-SEP-X`},
		{`-m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-X`, `-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-X`},
		{`-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`,
			`! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`},
		{`-m comment --comment "x" -m addrtype --src-type LOCAL -j RETURN`, `-m comment --comment x -m addrtype --src-type LOCAL -j RETURN`},
		{`-m comment --comment "x y" -m tcp -p tcp -d 10.1.1.1 --dport 80 -s 192.168.0.0/24 -j RETURN`,
			`-s 192.168.0.0/24 -d 10.1.1.1/32 -p tcp -m comment --comment "x y" -m tcp --dport 80 -j RETURN`},
		{`-m sctp -p sctp -d 10.1.1.1 --dport 80 -j RETURN`, `-d 10.1.1.1/32 -p sctp -m sctp --dport 80 -j RETURN`},
		{`-m comment --comment "a has no endpoints" -m tcp -p tcp -d 10.1.1.1 --dport 80 -j REJECT`,
			`-d 10.1.1.1/32 -p tcp -m comment --comment "a has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable`},
		{`-m comment --comment "q" -d 10.1.1.0/24 -j RETURN`, `-d 10.1.1.0/24 -m comment --comment q -j RETURN`},
		{`-m comment --comment "it\'s" -j RETURN`, `-m comment --comment "it\'s" -j RETURN`},
		{`-m comment --comment "a\"b" -j RETURN`, `-m comment --comment "a\"b" -j RETURN`},
		{`-d 0.0.0.0/0 -s 1.1.1.1/32 -j RETURN`, `-s 1.1.1.1/32 -j RETURN`},
		{`-m tcp -p tcp --dport 80 -m comment --comment x -j RETURN`, `-p tcp -m tcp --dport 80 -m comment --comment x -j RETURN`},
		{`-m mark ! --mark 0x4000/0x4000 -j RETURN`, `-m mark ! --mark 0x4000/0x4000 -j RETURN`},
		{`-j MARK --xor-mark 0x4000`, `-j MARK --set-xmark 0x4000/0x0`},
		{`-j MARK --or-mark 0x4000`, `-j MARK --set-xmark 0x4000/0x4000`},
		{`-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
			`-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`},
		{`-m comment --comment "kubette: service CIDR traffic that was not DNATed" -d 10.96.0.0/12 -m conntrack ! --ctstate DNAT -p tcp -j REJECT --reject-with tcp-reset`,
			`-d 10.96.0.0/12 -p tcp -m comment --comment "kubette: service CIDR traffic that was not DNATed" -m conntrack ! --ctstate DNAT -j REJECT --reject-with tcp-reset`},
		{`-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`, `-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`},
		{`-m comment --comment "other traffic to default/web:http will be dropped by KUBE-PROXY-FIREWALL"`,
			`-m comment --comment "other traffic to default/web:http will be dropped by KUBE-PROXY-FIREWALL"`},
		{`-m comment --comment "default/web:http loadbalancer IP" -s 0.0.0.0/0 -j KUBE-EXT-X`, `-m comment --comment "default/web:http loadbalancer IP" -j KUBE-EXT-X`},
	} {
		got, ok := SaveForm(c.rule)
		if !ok || got != c.want {
			t.Errorf("SaveForm(%s)\n = %q, %v\nwant %q", c.rule, got, ok, c.want)
		}
	}
	// What it cannot predict it refuses.
	for _, rule := range []string{
		``, `-j`, `-d 1.2.3.4`, `--dport 80 -j ACCEPT`, `-m tcp --dport 80 -j ACCEPT`, `-m owner --uid-owner 0 -j ACCEPT`,
		`-j LOG --log-prefix x`, `-j SNAT --to-source 1.2.3.4`, `-m comment --comment "unterminated -j ACCEPT`, `-d 10.0.0.300 -j ACCEPT`,
		`-d ::1 -j ACCEPT`, `! ! -d 1.2.3.4 -j ACCEPT`, `-j ACCEPT !`, `-m statistic --mode nth --every 2 -j ACCEPT`, `-j MARK --or-mark 0x1/0x1`,
		`-j OTHER-CHAIN`, `-m recent --name x -j ACCEPT`, `-d 1.2.3.4 -d 1.2.3.5 -j ACCEPT`,
	} {
		if got, ok := SaveForm(rule); ok {
			t.Errorf("SaveForm(%q) = %q, want refused", rule, got)
		}
	}
}

func FuzzSaveForm(f *testing.F) {
	for _, cs := range goldenCases() {
		for _, c := range Render(cs, testOptions).NAT {
			for _, r := range c.Rules {
				f.Add(r)
			}
		}
	}
	f.Fuzz(func(t *testing.T, rule string) {
		form, ok := SaveForm(rule)
		if !ok {
			return
		}
		// A save form is its own save form: iptables-restore of what
		// iptables-save printed prints the same again.
		again, ok := SaveForm(form)
		if !ok || again != form {
			t.Fatalf("SaveForm(%q) = %q, but SaveForm of that = %q, %v", rule, form, again, ok)
		}
	})
}
