// Package benchkit is what the benchmark drivers (loadgen, syncbench)
// share: `tributary serve` child processes and throwaway Postgres store
// databases.
package benchkit

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Server is a `tributary serve` child on a temporary directory.
type Server struct {
	Cmd  *exec.Cmd
	Dir  string // removed by Stop
	URL  string // http://host:port once ready
	name string // the driver's name, for its messages
	done chan error
	bin  string
	env  []string
	argv []string
}

// StartServer writes config to dir/tributary.yaml, starts bin serve on a
// free loopback port with its data under dir/data, and waits until it
// listens. env and args extend the child's environment and arguments;
// name prefixes the driver's messages. On failure dir is removed.
func StartServer(name, bin, dir, config string, env, args []string) (*Server, error) {
	cfgPath := filepath.Join(dir, "tributary.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	argv := append([]string{"serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}, args...)
	s := &Server{Dir: dir, name: name, bin: bin, env: env, argv: argv}
	if err := s.start(2 * time.Minute); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// start runs the server's command and waits until it listens, at most wait.
func (s *Server) start(wait time.Duration) error {
	cmd := exec.Command(s.bin, s.argv...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.Cmd, s.done = cmd, make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				ready <- addr
			}
		}
		s.done <- cmd.Wait() // after stdout is drained, as exec requires
	}()
	select {
	case addr := <-ready:
		s.URL = "http://" + addr
		return nil
	case err := <-s.done:
		s.exited()
		return fmt.Errorf("server exited before it was ready: %v", err)
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-s.done
		s.exited()
		return fmt.Errorf("server not ready after %s", wait)
	}
}

// exited makes done answer at once: the process is gone and its one
// result was taken, so a later Stop must not wait for another.
func (s *Server) exited() {
	d := make(chan error)
	close(d)
	s.done = d
}

// Restart stops the server (SIGTERM, or SIGKILL when kill is set), starts
// it again on the same data and returns how long the new process took from
// its start until it listened (the store open, its dedup keys loaded).
func (s *Server) Restart(kill bool) (time.Duration, error) {
	if kill {
		_ = s.Cmd.Process.Kill()
		<-s.done
	} else {
		s.shutdown()
	}
	start := time.Now()
	// A store that rebuilds its state from its tables may take minutes.
	if err := s.start(15 * time.Minute); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Stop shuts the server down gracefully (SIGTERM, a minute's grace) and
// removes its directory.
func (s *Server) Stop() {
	s.shutdown()
	os.RemoveAll(s.Dir)
}

// Halt shuts the server down gracefully like Stop but keeps its
// directory, for a driver that reads the stopped server's data (Stop
// still removes it after).
func (s *Server) Halt() {
	s.shutdown()
	s.exited()
}

func (s *Server) shutdown() {
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: server exited with %v after SIGTERM\n", s.name, err)
		}
	case <-time.After(time.Minute):
		_ = s.Cmd.Process.Kill()
		<-s.done
		fmt.Fprintf(os.Stderr, "%s: server ignored SIGTERM for a minute; killed\n", s.name)
	}
}
