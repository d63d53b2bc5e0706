// Package pgtest gives tests a throwaway PostgreSQL server on loopback:
// Debian's postgresql package (initdb and postgres), started once per test
// binary in a temporary directory, on a free port of 127.0.0.1, and
// stopped (its files removed) when the binary's tests end. Each [New] call
// creates a database of its own on it, so tests never see each other's
// rows.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.New(t) // postgres://…/t_3?sslmode=disable
//		…
//	}
//
// CLAUDECTL_TEST_POSTGRES, when set to a server's URL, is used instead of
// starting one (its user must be allowed to create databases). Without
// PostgreSQL installed the tests skip, except under CI=true, where a missing
// part is a failure; `make test` installs it when it can.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable of a server to use instead of a
// throwaway one.
const EnvURL = "CLAUDECTL_TEST_POSTGRES"

var (
	mu      sync.Mutex
	srv     *Server
	srvErr  error
	started bool
	dbs     atomic.Int64
)

// Main runs the tests and then stops the server they started, if any. Use
// it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int { return M(m).Run() }

// M wraps m so that its Run stops the server afterwards, for TestMains
// that hand m to another wrapper: goleak.VerifyTestMain(pgtest.M(m)).
func M(m interface{ Run() int }) interface{ Run() int } { return stopAfter{m} }

type stopAfter struct{ m interface{ Run() int } }

func (s stopAfter) Run() int {
	code := s.m.Run()
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.Stop()
		srv = nil
	}
	return code
}

// New returns the URL of a new, empty database on the test server, which
// it starts on first use. It skips the test when PostgreSQL is not
// installed, and fails it under CI=true.
func New(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}

// ServerURL returns the URL of the test server's maintenance database
// (postgres), starting the server on first use; see [New] for when it
// skips.
func ServerURL(t testing.TB) string {
	t.Helper()
	u, err := serverURL()
	if err != nil {
		fail(t, err)
	}
	return u
}

// Own starts a server of the test's own (one it may restart), stopped when
// the test's cleanups run (register it before what uses it: cleanups run
// last first). It skips or fails as New does.
func Own(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// fail skips the test when PostgreSQL is missing (outside CI) and fails it
// otherwise.
func fail(t testing.TB, err error) {
	t.Helper()
	var m *MissingError
	if errors.As(err, &m) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// Shared returns the server the test binary started, nil when it uses
// CLAUDECTL_TEST_POSTGRES or has not started one.
func Shared() *Server {
	mu.Lock()
	defer mu.Unlock()
	return srv
}

func serverURL() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		srv, srvErr = Start()
	}
	if srvErr != nil {
		return "", srvErr
	}
	return srv.URL(), nil
}

// A MissingError says PostgreSQL is not installed.
type MissingError struct{ What string }

func (e *MissingError) Error() string {
	return "PostgreSQL is not installed (" + e.What + "): install Debian's postgresql package (make test does it when it can)"
}

// BinDir finds the directory of PostgreSQL's server programs: pg_config
// --bindir, the newest /usr/lib/postgresql/N/bin, or initdb on PATH.
func BinDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			d := filepath.Dir(p)
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				return d, nil
			}
		}
	}
	return "", &MissingError{What: "no initdb and postgres in pg_config --bindir, /usr/lib/postgresql/*/bin or on PATH"}
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// A Server is a running throwaway PostgreSQL.
type Server struct {
	Dir  string // its data directory's parent, removed by Stop
	Port int
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
	bin  string
	cred *syscall.Credential
	once sync.Once
}

// URL is the server's maintenance database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Start initialises a cluster in a new temporary directory and starts its
// server on a free loopback port. As root it runs them as the postgres
// user (PostgreSQL refuses to run as root). The server dies with the
// process that started it.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "claudectl-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, done: make(chan struct{}), log: new(bytes.Buffer)}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(&MissingError{What: "running as root and there is no postgres user to run the server as"})
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb: %v\n%s", err, out))
	}
	for attempt := 0; ; attempt++ {
		s.Port, err = freePort()
		if err != nil {
			return fail(err)
		}
		if err = s.start(data); err == nil {
			return s, nil
		}
		s.kill(syscall.SIGKILL) // the port was taken meanwhile, say
		if attempt == 3 {
			return fail(err)
		}
		s.done, s.log = make(chan struct{}), new(bytes.Buffer)
	}
}

func (s *Server) start(data string) error {
	// No fsync (a test server's data is thrown away, and no test crashes
	// the machine), but synchronous_commit stays on: a commit is written
	// to the WAL before it is acknowledged, so it survives the server
	// being killed (Restart), as on a real server.
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.Dir,
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=64MB")
	s.cmd.Dir = s.Dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: postgres: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-s.done:
			return fmt.Errorf("pgtest: postgres exited: %s", s.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres did not accept connections in 30s: %v\n%s", err, s.log)
		}
	}
}

// Restart stops the server abruptly (immediate shutdown: connections cut,
// crash recovery on start) and starts it again on the same port, after
// down has passed.
func (s *Server) Restart(down time.Duration) error {
	s.Down()
	time.Sleep(down)
	return s.Up()
}

// Down stops the server abruptly, as Restart does, and returns once it
// has ended: a test that must act while the server is down calls Down,
// then Up, rather than guess when Restart's server has gone.
func (s *Server) Down() { s.kill(syscall.SIGQUIT) }

// Up starts the server Down stopped again, on the same port, and returns
// once it accepts connections.
func (s *Server) Up() error {
	s.done = make(chan struct{})
	return s.start(filepath.Join(s.Dir, "data"))
}

// kill sends sig to the postmaster and waits for it (and its backends) to
// end.
func (s *Server) kill(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// Stop stops the server and removes its files. Idempotent.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.kill(syscall.SIGQUIT)
		if s.cmd != nil && s.cmd.Process != nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // stray backends
		}
		os.RemoveAll(s.Dir)
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
