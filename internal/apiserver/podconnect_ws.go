package apiserver

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

// streamProtocolV5 is the WebSocket subprotocol of kubectl's exec and attach: channels 0-4
// (stdin, stdout, stderr, error, resize) plus the CLOSE signal (255) that ends stdin.
const streamProtocolV5 = "v5.channel.k8s.io"

// The channels of a remote command session.
const (
	chanStdin = iota
	chanStdout
	chanStderr
	chanError
	chanResize
)

// translateToSPDY serves a v5.channel.k8s.io WebSocket exec or attach: it accepts the
// WebSocket, opens an SPDY session to the kubelet at loc with client-go's executor (the
// kubelet and the runtime speak SPDY) and relays the streams between the two; the session's
// end goes to the error channel as a Status (an exit code as reason NonZeroExitCode, cause
// ExitCode), as upstream's stream translator does.
func (s *Server) translateToSPDY(w http.ResponseWriter, req *http.Request, loc *url.URL, tlsCfg *tls.Config, st streams) {
	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{TLS: tlsCfg})
	if err != nil {
		s.writeError(w, req, fmt.Errorf("spdy transport: %w", err))
		return
	}
	executor, err := remotecommand.NewSPDYExecutorForTransports(rt, rt, http.MethodPost, loc)
	if err != nil {
		s.writeError(w, req, fmt.Errorf("spdy executor: %w", err))
		return
	}
	channel := func(on bool, t wsstream.ChannelType) wsstream.ChannelType {
		if on {
			return t
		}
		return wsstream.IgnoreChannel
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		streamProtocolV5: {Binary: true, Channels: []wsstream.ChannelType{
			chanStdin:  channel(st.stdin, wsstream.ReadChannel),
			chanStdout: channel(st.stdout, wsstream.WriteChannel),
			chanStderr: channel(st.stderr && !st.tty, wsstream.WriteChannel),
			chanError:  wsstream.WriteChannel,
			chanResize: channel(st.tty, wsstream.ReadChannel),
		}},
	})
	_, chans, err := conn.Open(w, req)
	if err != nil {
		// The handshake failed and was answered (the client falls back to SPDY).
		s.log.Debug("websocket exec/attach", "path", req.URL.Path, "err", err)
		return
	}
	defer conn.Close()

	opts := remotecommand.StreamOptions{Tty: st.tty}
	if st.stdin {
		opts.Stdin = chans[chanStdin]
	}
	if st.stdout {
		opts.Stdout = chans[chanStdout]
	}
	if st.stderr && !st.tty {
		opts.Stderr = chans[chanStderr]
	}
	if st.tty {
		opts.TerminalSizeQueue = &resizeQueue{dec: json.NewDecoder(chans[chanResize])}
	}
	err = executor.StreamWithContext(req.Context(), opts)
	b, merr := json.Marshal(sessionStatus(err))
	if merr != nil {
		return
	}
	_, _ = chans[chanError].Write(b)
}

// sessionStatus is the Status a session's end is reported as on the error channel.
func sessionStatus(err error) *metav1.Status {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}}
	var exitErr exec.ExitError
	switch {
	case err == nil:
		st.Status = metav1.StatusSuccess
	case errors.As(err, &exitErr) && exitErr.Exited():
		st.Status = metav1.StatusFailure
		st.Reason = "NonZeroExitCode"
		st.Message = fmt.Sprintf("command terminated with non-zero exit code: %v", exitErr)
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(exitErr.ExitStatus())}}}
	default:
		st.Status = metav1.StatusFailure
		st.Reason = metav1.StatusReasonInternalError
		st.Code = http.StatusInternalServerError
		st.Message = err.Error()
	}
	return st
}

// resizeQueue reads the client's terminal sizes (JSON objects on the resize channel).
type resizeQueue struct{ dec *json.Decoder }

// Next returns the next size, or nil once the channel ends.
func (q *resizeQueue) Next() *remotecommand.TerminalSize {
	var sz remotecommand.TerminalSize
	if err := q.dec.Decode(&sz); err != nil {
		return nil // the client closed the channel, or sent something that is not a size
	}
	return &sz
}
