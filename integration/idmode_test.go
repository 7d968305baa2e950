package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestIDModeChangeRefused: once a project holds data, a config that changes
// its ID management mode stops the server at start with a message naming
// the project, and the data stays as it was.
func TestIDModeChangeRefused(t *testing.T) {
	s := startServer(t, defaultConfig())
	body := []byte(`[{"event":"e","properties":{"time":1700000000,"distinct_id":"u","$insert_id":"m1"}}]`)
	if rep := s.do(t, request{Path: "/import", Body: body, Auth: basicAuth(otherSecret, "")}); rep.Status != 200 {
		t.Fatalf("import: %s", rep)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Projects[2].IDManagement = "simplified" // project 3 was original
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binPath, "serve", "--config", s.cfgPath, "--listen", "127.0.0.1:0", "--data-dir", s.dataDir).CombinedOutput()
	if err == nil {
		t.Fatalf("server started with a changed ID mode:\n%s", out)
	}
	if msg := string(out); !strings.Contains(msg, "projects[2].id_management") || !strings.Contains(msg, "cannot change once it holds data") {
		t.Fatalf("refusal does not name the key and the rule:\n%s", msg)
	}
	// With the original mode the server starts on the same data.
	s.Cfg = defaultConfig()
	s.Start()
}
