package engine

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Environment of the child process that TestEngineFallback starts: the system calls a
// seccomp filter refuses with ENOSYS, and the engine the child must then choose.
const (
	denySyscallsEnv = "FFRECORD_TEST_DENY_SYSCALLS"
	wantEngineEnv   = "FFRECORD_TEST_WANT_ENGINE"
)

// fallbackSyscalls maps each system call the test may refuse to its number and to the
// engine that cannot work without it.
var fallbackSyscalls = map[string]struct {
	nr     uintptr
	engine string
}{
	"io_uring_setup": {unix.SYS_IO_URING_SETUP, "io_uring"},
	"io_uring_enter": {unix.SYS_IO_URING_ENTER, "io_uring"},
	"io_setup":       {unix.SYS_IO_SETUP, "aio"},
}

// TestEngineFallback runs the engine choice in a child process whose system calls are
// filtered the way a container's seccomp profile may filter them.
func TestEngineFallback(t *testing.T) {
	if deny := os.Getenv(denySyscallsEnv); deny != "" {
		checkFallbackChild(t, strings.Split(deny, ","), os.Getenv(wantEngineEnv))
		return
	}
	cases := []struct{ deny, want string }{
		{"io_uring_setup", "aio"},
		{"io_uring_enter", "aio"}, // setup allowed, enter refused: caught by the probe
		{"io_uring_setup,io_setup", "pread"},
	}
	for _, c := range cases {
		t.Run("deny="+c.deny, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEngineFallback$", "-test.v")
			cmd.Env = append(os.Environ(), denySyscallsEnv+"="+c.deny, wantEngineEnv+"="+c.want, Env+"=")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestEngineFallback") {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

func checkFallbackChild(t *testing.T, deny []string, want string) {
	if err := denySyscalls(deny); err != nil {
		t.Fatal(err)
	}
	for _, name := range deny {
		kind := fallbackSyscalls[name].engine
		if _, err := New(kind); !errors.Is(err, unix.ENOSYS) {
			t.Errorf("%s refused: New(%s) gave %v, want ENOSYS", name, kind, err)
		}
	}
	e, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Name() != want {
		t.Fatalf("with %v refused the engine is %s, want %s", deny, e.Name(), want)
	}
	f := newEngineTestFile(t, 50_001, 15)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, direct := range []bool{false, true} {
		reqs := engineRandomRequests(rng, f, direct, 100)
		if err := e.Read(reqs, direct); err != nil {
			t.Fatal(err)
		}
		engineCheckRequests(t, f, reqs)
	}
}

// denySyscalls installs, on every thread of the process, a seccomp filter failing the
// named system calls with ENOSYS.
func denySyscalls(names []string) error {
	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
		nrSlot = 0 // offset of the syscall number in struct seccomp_data
	)
	prog := []unix.SockFilter{{Code: ldAbs, K: nrSlot}}
	for _, name := range names {
		call, ok := fallbackSyscalls[name]
		if !ok {
			return errors.New("unknown system call " + name)
		}
		prog = append(prog,
			unix.SockFilter{Code: jeqK, Jt: 0, Jf: 1, K: uint32(call.nr)},
			unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	}
	prog = append(prog, unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ALLOW})
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}
