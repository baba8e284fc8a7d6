package apiserver

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/net/websocket"

	"github.com/kubette/kubette/internal/streamproxy"
)

// The WebSocket subprotocols of a streamed answer (pods/log), as upstream's stream reader:
// binary.k8s.io (and no protocol) sends the bytes as binary messages, base64.binary.k8s.io
// as base64 text messages.
const (
	streamProtocolBinary = "binary.k8s.io"
	streamProtocolBase64 = "base64.binary.k8s.io"
)

// serveStreamOverWebSocket sends body to a WebSocket client, as upstream's API server
// serves a streamed answer to a WebSocket request: an empty message first, then each read
// of body as one message, and the close when body ends (or the client closes). A client
// that asks only for protocols other than these gets 400 before the upgrade.
func (s *Server) serveStreamOverWebSocket(w http.ResponseWriter, req *http.Request, body io.Reader) {
	srv := websocket.Server{
		Handshake: negotiateStreamProtocol,
		Handler: func(ws *websocket.Conn) {
			defer ws.Close()
			// The client sends nothing; reading notices its close, and then the copy ends.
			go func() {
				_, _ = io.Copy(io.Discard, ws)
				_ = ws.Close()
			}()
			base64Text := ws.Config().Protocol[0] == streamProtocolBase64
			if err := copyMessages(ws, body, base64Text); err != nil && req.Context().Err() == nil {
				s.log.Debug("stream over websocket ended", "path", req.URL.Path, "err", err)
			}
		},
	}
	srv.ServeHTTP(streamproxy.ResponseWriter(w), req)
}

// negotiateStreamProtocol picks the first protocol of the client's that is served ("" when
// it names none).
func negotiateStreamProtocol(cfg *websocket.Config, _ *http.Request) error {
	asked := cfg.Protocol
	if len(asked) == 0 {
		asked = []string{""}
	}
	for _, p := range asked {
		switch p {
		case "", streamProtocolBinary, streamProtocolBase64:
			cfg.Protocol = []string{p}
			return nil
		}
	}
	return fmt.Errorf("requested protocol(s) are not supported: %v; supports %v", cfg.Protocol, []string{"", streamProtocolBinary, streamProtocolBase64})
}

// copyMessages sends an empty message, then every read of r as a message.
func copyMessages(ws *websocket.Conn, r io.Reader, base64Text bool) error {
	send := func(p []byte) error {
		if base64Text {
			return websocket.Message.Send(ws, base64.StdEncoding.EncodeToString(p))
		}
		return websocket.Message.Send(ws, p)
	}
	if err := send([]byte{}); err != nil {
		return err
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := send(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
