package paths

import "testing"

func TestStateAndRuntimeDirs(t *testing.T) {
	env := func(uid int, kv ...string) Env {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return Env{Getenv: func(k string) string { return m[k] }, UID: uid, TempDir: "/tmp"}
	}
	tests := []struct {
		name     string
		env      Env
		flag     string
		state    string
		runtime  string
		runFlag  string
		runtimes int
	}{
		{"flag wins", env(1000, "GPUGUARD_STATE_DIR", "/s", "HOME", "/home/u"), "/mine", "/mine", "/tmp/gpuguard-1000", "", 1},
		{"GPUGUARD_STATE_DIR", env(1000, "GPUGUARD_STATE_DIR", "/s", "XDG_STATE_HOME", "/x"), "", "/s/llama", "/tmp/gpuguard-1000", "", 1},
		{"XDG_STATE_HOME", env(1000, "XDG_STATE_HOME", "/x", "HOME", "/home/u"), "", "/x/gpuguard/llama", "/tmp/gpuguard-1000", "", 1},
		{"home", env(1000, "HOME", "/home/u"), "", "/home/u/.local/state/gpuguard/llama", "/tmp/gpuguard-1000", "", 1},
		{"root", env(0, "HOME", "/root"), "", "/var/lib/gpuguard/llama", "/run/gpuguard", "", 1},
		{"runtime env", env(1000, "HOME", "/h", "GPUGUARD_RUNTIME_DIR", "/r", "XDG_RUNTIME_DIR", "/run/user/1000"), "", "/h/.local/state/gpuguard/llama", "/r", "", 1},
		{"xdg runtime", env(1000, "HOME", "/h", "XDG_RUNTIME_DIR", "/run/user/1000"), "", "/h/.local/state/gpuguard/llama", "/run/user/1000/gpuguard", "", 1},
		{"root with a user runtime dir also scans the system one", env(0, "XDG_RUNTIME_DIR", "/run/user/0"), "", "/var/lib/gpuguard/llama", "/run/user/0/gpuguard", "", 2},
		{"runtime flag", env(0), "", "/var/lib/gpuguard/llama", "/flag", "/flag", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.env.StateDir(tt.flag, "llama")
			if err != nil || got != tt.state {
				t.Errorf("StateDir: %q %v, want %q", got, err, tt.state)
			}
			rt, err := tt.env.RuntimeDir(tt.runFlag)
			if err != nil || rt != tt.runtime {
				t.Errorf("RuntimeDir: %q %v, want %q", rt, err, tt.runtime)
			}
			dirs, _ := tt.env.RuntimeDirs(tt.runFlag)
			if len(dirs) != tt.runtimes {
				t.Errorf("RuntimeDirs: %q, want %d", dirs, tt.runtimes)
			}
		})
	}
	if _, err := (Env{Getenv: func(string) string { return "" }, UID: 1000}).StateDir("", "x"); err == nil {
		t.Error("no HOME and no override: want an error")
	}
	if got := Socket("/r", "llama"); got != "/r/llama.sock" {
		t.Errorf("Socket: %q", got)
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"llama", "llama-3.1_8b", "svc@gpu0"} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "ünï", string(make([]byte, 101))} {
		if ValidName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
