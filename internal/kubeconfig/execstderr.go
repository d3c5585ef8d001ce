package kubeconfig

import (
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Capturing what exec credential plugins write to stderr.
//
// A plugin explains its failures on stderr ("your session expired, run
// corp-login"), but client-go hands every plugin the os.Stderr of the moment
// it builds the transport, with no option for another writer, and the
// provider's stderr only reaches Terraform's debug log. Running the plugin a
// second time to hear it is not an option: it may prompt for MFA, rotate a
// token or have other side effects. So while client-go builds the transport,
// os.Stderr is a pipe that copies everything to the real stderr and keeps the
// end of it: the plugin runs once, and its words can still be quoted.

// execStderrMax is how much of the plugins' stderr is kept.
const execStderrMax = 2000

var (
	execStderrOnce sync.Once
	execStderr     *stderrTail
	execStderrErr  error
	// swapMu serialises the swaps of os.Stderr.
	swapMu sync.Mutex
)

// WithExecStderr runs build, which creates the client-go transport of a
// rest.Config with an ExecProvider (rest.HTTPClientFor, client.New...), with
// os.Stderr redirected so that the plugins it runs later write into the tail
// that ExecStderr returns. Everything still reaches the real stderr.
func WithExecStderr(build func() error) error {
	execStderrOnce.Do(func() { execStderr, execStderrErr = newStderrTail(os.Stderr) })
	if execStderrErr != nil {
		// No pipe: the plugins write to the real stderr, as client-go does.
		return build()
	}
	swapMu.Lock()
	defer swapMu.Unlock()
	real := os.Stderr
	os.Stderr = execStderr.w
	defer func() { os.Stderr = real }()
	return build()
}

// ExecStderr is the end of what exec credential plugins started under
// WithExecStderr wrote to stderr, trimmed; "" when they wrote nothing or the
// output could not be captured.
func ExecStderr() string {
	if execStderr == nil {
		return ""
	}
	return execStderr.String()
}

// ExecStderrHint says where a plugin's stderr went when none was captured.
const ExecStderrHint = "No error output of the plugin was captured: anything it wrote to stderr went to the provider's " +
	"standard error, which Terraform writes to its log (run with TF_LOG_PROVIDER=DEBUG to see it)."

// stderrTail copies a pipe to out and keeps the last execStderrMax bytes.
type stderrTail struct {
	w *os.File

	mu   sync.Mutex
	buf  []byte
	last time.Time
}

func newStderrTail(out io.Writer) (*stderrTail, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t := &stderrTail{w: w}
	go t.copy(r, out)
	return t, nil
}

func (t *stderrTail) copy(r io.Reader, out io.Writer) {
	p := make([]byte, 4096)
	for {
		n, err := r.Read(p)
		if n > 0 {
			_, _ = out.Write(p[:n])
			t.mu.Lock()
			t.buf = append(t.buf, p[:n]...)
			if len(t.buf) > execStderrMax {
				t.buf = append(t.buf[:0], t.buf[len(t.buf)-execStderrMax:]...)
			}
			t.last = time.Now()
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// String waits until the pipe has been quiet for a moment (the plugin has
// exited when its error is reported, but the copy may lag behind), then
// returns the tail.
func (t *stderrTail) String() string {
	const quiet, most = 50 * time.Millisecond, 500 * time.Millisecond
	for start := time.Now(); time.Since(start) < most; time.Sleep(10 * time.Millisecond) {
		t.mu.Lock()
		idle := time.Since(t.last) >= quiet
		t.mu.Unlock()
		if idle {
			break
		}
	}
	// Give data already in the pipe one chance to arrive.
	time.Sleep(quiet)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := strings.TrimSpace(string(t.buf))
	if len(t.buf) == execStderrMax {
		out = "..." + out
	}
	return out
}
