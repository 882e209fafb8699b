package harness

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// sluicePackage is the binary the process suites run, named by import
// path so that a build works from any test package's directory.
const sluicePackage = "github.com/sluicehq/sluice/cmd/sluice"

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// BuildSluice builds the sluice binary once per test run.
func BuildSluice(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", builtBin, sluicePackage).CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("building sluice: %v", buildErr)
	}
	return builtBin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// Role is a sluice process started by a test.
type Role struct {
	Admin string // base URL of its admin server
	HTTP  string // base URL of its API, for the api role
	log   *strings.Builder
}

var listening = regexp.MustCompile(`"msg":"(admin|http) listening","addr":"([^"]+)"`)

// StartRole runs `sluice <name>` with env and waits until its servers
// listen, reading their addresses from its log.
func StartRole(t testing.TB, name string, env []string) *Role {
	t.Helper()
	cmd := exec.Command(BuildSluice(t), name)
	cmd.Env = append(os.Environ(), append([]string{"SLUICE_ADMIN_ADDR=127.0.0.1:0", "SLUICE_HTTP_ADDR=127.0.0.1:0", "SLUICE_LOG_LEVEL=info"}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	r := &Role{log: &strings.Builder{}}
	found := make(chan struct{})
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			r.log.WriteString(line + "\n")
			if m := listening.FindStringSubmatch(line); m != nil {
				if m[1] == "admin" {
					r.Admin = "http://" + m[2]
				} else {
					r.HTTP = "http://" + m[2]
				}
			}
			if !closed && r.Admin != "" && (name != "api" || r.HTTP != "") {
				close(found)
				closed = true
			}
			mu.Unlock()
		}
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("sluice %s did not listen within 60s; its log:\n%s", name, r.log)
	}
	mu.Lock()
	defer mu.Unlock()
	return r
}
