package bench

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// stackCPU is the CPU time, in seconds, each part of the test stack had
// used when it was read, and the machine's: what a phase cost is the
// difference of two readings. The parts are Temporal (devstack's own
// process, which runs the whole server in-process on SQLite), Postgres
// (devstack's postgres processes) and this process (Sluice's roles and
// the team's worker, which the benchmarks run in-process, and the
// callers). Postgres's backends that ended during a phase are not
// counted: the pools keep theirs open. found is false when no devstack is an ancestor of this
// process (TEMPORAL_ADDRESS names another server): then only this
// process and the machine are read.
type stackCPU struct {
	temporal, postgres, self float64
	// busy and all are the machine's CPU seconds, over all cores, spent
	// working and in total (/proc/stat).
	busy, all float64
	found     bool
}

// clockTicks is Linux's USER_HZ, in which /proc reports CPU time.
const clockTicks = 100

// readStackCPU reads each part's CPU time now.
func readStackCPU() stackCPU {
	var s stackCPU
	s.self = procCPU(os.Getpid())
	s.busy, s.all = machineCPU()
	devstack := 0
	for pid := os.Getppid(); pid > 1; {
		comm, ppid, ok := procStat(pid)
		if !ok {
			break
		}
		if strings.HasPrefix(comm, "devstack") {
			devstack = pid
			break
		}
		pid = ppid
	}
	if devstack == 0 {
		return s
	}
	s.found = true
	s.temporal = procCPU(devstack)
	s.postgres = postgresCPU()
	return s
}

// postgresCPU is the CPU time of the Postgres that DATABASE_URL names:
// its postmaster (pg_ctl leaves it no parent of devstack's, so it is
// told by the port on its command line) and the postmaster's children.
func postgresCPU() float64 {
	u, err := url.Parse(os.Getenv("DATABASE_URL"))
	if err != nil || u.Port() == "" {
		return 0
	}
	entries, _ := filepath.Glob("/proc/[0-9]*/stat")
	type proc struct{ pid, ppid int }
	var postgres []proc
	postmaster := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(e)))
		if err != nil {
			continue
		}
		comm, ppid, ok := procStat(pid)
		if !ok || comm != "postgres" {
			continue
		}
		postgres = append(postgres, proc{pid, ppid})
		if args, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil &&
			strings.HasSuffix(strings.TrimRight(string(args), "\x00"), "\x00-p\x00"+u.Port()) {
			postmaster = pid
		}
	}
	var sec float64
	for _, p := range postgres {
		if p.pid == postmaster || (postmaster != 0 && p.ppid == postmaster) {
			sec += procCPU(p.pid)
		}
	}
	return sec
}

// since is what each part spent from before to s, and the share of the
// machine's CPU that was busy meanwhile.
func (s stackCPU) since(before stackCPU) (d stackCPU, busyShare float64) {
	d = stackCPU{temporal: s.temporal - before.temporal, postgres: s.postgres - before.postgres, self: s.self - before.self,
		busy: s.busy - before.busy, all: s.all - before.all, found: s.found && before.found}
	if d.all > 0 {
		busyShare = d.busy / d.all
	}
	return d, busyShare
}

// perStart prints the CPU each part spent per start, in ms, over n starts.
func (s stackCPU) perStart(n int) string {
	ms := func(sec float64) string { return fmt.Sprintf("%.1f", 1000*sec/float64(n)) }
	if !s.found {
		return "this process " + ms(s.self) + " ms (no devstack found to read Temporal's and Postgres's)"
	}
	return fmt.Sprintf("Temporal %s, Postgres %s, this process (Sluice, the team worker, the callers) %s ms",
		ms(s.temporal), ms(s.postgres), ms(s.self))
}

// procStat reads a process's command name and parent from /proc.
func procStat(pid int) (comm string, ppid int, ok bool) {
	f, ok := statFields(pid)
	if !ok {
		return "", 0, false
	}
	if len(f) < 3 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[2])
	return f[0], ppid, err == nil
}

// procCPU is a process's user and system CPU time, all its threads, in
// seconds; 0 when it cannot be read.
func procCPU(pid int) float64 {
	f, ok := statFields(pid)
	if !ok || len(f) < 14 {
		return 0
	}
	utime, err1 := strconv.ParseFloat(f[12], 64)
	stime, err2 := strconv.ParseFloat(f[13], 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (utime + stime) / clockTicks
}

// statFields are /proc/<pid>/stat's fields from the command name on
// (fields 2 onwards, the name without its parentheses), so that index i
// is field i+2 of proc(5): 0 the name, 2 the parent, 12 and 13 the user
// and system time.
func statFields(pid int) ([]string, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return nil, false
	}
	return append([]string{s[open+1 : closing]}, strings.Fields(s[closing+1:])...), true
}

// machineCPU is the machine's busy and total CPU seconds over all cores.
func machineCPU() (busy, all float64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	var idle float64
	for i, v := range f[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		all += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return (all - idle) / clockTicks, all / clockTicks
}
