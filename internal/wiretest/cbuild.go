package wiretest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildC compiles the C program src with the system's compiler, linked
// with libs (as -l flags), and returns the binary's path. Without a
// compiler or a library it skips the test, saying which Debian packages
// (pkgs) to install; under CI, which installs them, it fails instead.
func BuildC(tb testing.TB, src, pkgs string, libs ...string) string {
	tb.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("no C compiler: CI must install gcc and %s", pkgs)
		}
		tb.Skipf("needs a C compiler and %s: apt-get install -y gcc %s", pkgs, pkgs)
	}
	bin := filepath.Join(tb.TempDir(), filepath.Base(src)+".bin")
	args := []string{"-o", bin, src}
	for _, l := range libs {
		args = append(args, "-l"+l)
	}
	out, err := exec.Command(cc, args...).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("building %s: %v\n%s", src, err, out)
		}
		tb.Skipf("building %s failed; is %s installed (apt-get install -y %s)? %s", src, pkgs, pkgs, out)
	}
	return bin
}
