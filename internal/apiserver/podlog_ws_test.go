package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
)

// dialLogWebSocket opens pods/{pod}/log of the default namespace over WebSocket with the
// admin's credentials, asking for protocols, as the conformance test does.
func dialLogWebSocket(t *testing.T, e *logEnv, pod string, protocols ...string) (*websocket.Conn, error) {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(e.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	u := e.env.Client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name(pod).SubResource("log").Param("container", "app").URL()
	u.Scheme = "wss"
	cfg, err := websocket.NewConfig(u.String(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TlsConfig, cfg.Protocol = tlsCfg, protocols
	return websocket.DialConfig(cfg)
}

// readMessages reads every message until the server closes.
func readMessages(t *testing.T, ws *websocket.Conn, text bool) []string {
	t.Helper()
	var msgs []string
	for {
		var data []byte
		var s string
		var err error
		if text {
			err = websocket.Message.Receive(ws, &s)
			data = []byte(s)
		} else {
			err = websocket.Message.Receive(ws, &data)
		}
		if errors.Is(err, io.EOF) {
			return msgs
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		msgs = append(msgs, string(data))
	}
}

func TestPodLogsOverWebSocket(t *testing.T) {
	e := startLogEnv(t)
	path := filepath.Join(e.dir, "0.log")
	appendCRI(t, path, 0, "container is alive", "second line")
	e.logs.set("default/web/app", path)
	e.pod(t, "web", "node-1", "app")

	// binary.k8s.io, as the conformance test: an empty message, then the log, then the close.
	ws, err := dialLogWebSocket(t, e, "web", "binary.k8s.io")
	if err != nil {
		t.Fatalf("dial binary.k8s.io: %v", err)
	}
	if p := ws.Config().Protocol; len(p) != 1 || p[0] != "binary.k8s.io" {
		t.Errorf("negotiated %v, want binary.k8s.io", p)
	}
	msgs := readMessages(t, ws, false)
	_ = ws.Close()
	if len(msgs) < 2 || msgs[0] != "" || strings.Join(msgs, "") != "container is alive\nsecond line\n" {
		t.Errorf("binary.k8s.io messages %q, want an empty one and then the log", msgs)
	}

	// base64.binary.k8s.io: text messages of base64.
	ws, err = dialLogWebSocket(t, e, "web", "base64.binary.k8s.io")
	if err != nil {
		t.Fatalf("dial base64.binary.k8s.io: %v", err)
	}
	var decoded bytes.Buffer
	for _, m := range readMessages(t, ws, true) {
		b, err := base64.StdEncoding.DecodeString(m)
		if err != nil {
			t.Fatalf("message %q is not base64: %v", m, err)
		}
		decoded.Write(b)
	}
	_ = ws.Close()
	if decoded.String() != "container is alive\nsecond line\n" {
		t.Errorf("base64.binary.k8s.io log %q", decoded.String())
	}

	// A protocol that is not served is refused at the handshake.
	if ws, err := dialLogWebSocket(t, e, "web", "v5.channel.k8s.io"); err == nil {
		_ = ws.Close()
		t.Error("dial with an unserved protocol succeeded")
	} else {
		var derr *websocket.DialError
		if !errors.As(err, &derr) || !errors.Is(derr.Err, websocket.ErrBadStatus) {
			t.Errorf("dial with an unserved protocol: %v, want a refused handshake", err)
		}
	}

	// An error before the stream (no such pod) is a Status with its code, not an upgrade.
	if _, err := dialLogWebSocket(t, e, "nope", "binary.k8s.io"); err == nil {
		t.Error("websocket to the log of a missing pod succeeded")
	}
}
