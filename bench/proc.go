package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times
// (100 on every architecture Go supports on Linux).
const clockTicks = 100

// serverCPU returns the CPU time (user + system, seconds) process pid has
// used, or -1 if it cannot be read.
func serverCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // fields 3.. ; utime and stime are fields 14 and 15
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return float64(ut+st) / clockTicks
}

// listenerPID finds the process listening on the TCP port of endpoint (an
// http://host:port URL) through /proc: the socket's inode in /proc/net/tcp*,
// then the process holding it. 0 when not found (another user's process, or
// not Linux).
func listenerPID(endpoint string) int {
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ... inode (field 10)
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			colon := strings.LastIndexByte(fields[1], ':')
			p, err := strconv.ParseInt(fields[1][colon+1:], 16, 32)
			if err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		file.Close()
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}

// dynamoDBLocalVersion reads the version of the DynamoDB Local jar process
// pid runs, from the jar's Maven metadata.
func dynamoDBLocalVersion(pid int) string {
	if pid <= 0 {
		return "unknown"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "unknown"
	}
	for _, arg := range strings.Split(string(b), "\x00") {
		for _, p := range strings.Split(arg, ":") {
			if filepath.Base(p) != "DynamoDBLocal.jar" {
				continue
			}
			if v := jarVersion(p); v != "" {
				return v
			}
		}
	}
	return "unknown"
}

func jarVersion(jar string) string {
	z, err := zip.OpenReader(jar)
	if err != nil {
		return ""
	}
	defer z.Close()
	f, err := z.Open("META-INF/maven/software/amazon/dynamodb/DynamoDBLocal/pom.properties")
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "version="); ok {
			return v
		}
	}
	return ""
}

// cpuSnapshot is the CPU time used so far by the machine, by this process
// and its waited-for children, by DynamoDB Local and by redis-server, so a
// section's report can say how much of the machine other processes took
// while it ran.
type cpuSnapshot struct {
	at                           time.Time
	machine, ours, server, redis float64 // seconds of CPU
}

func snapshot(serverPID, redisPID int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), server: max(serverCPU(serverPID), 0), redis: max(serverCPU(redisPID), 0)}
	// cpu  user nice system idle iowait irq softirq steal ...
	if f := strings.Fields(firstLine(readFile("/proc/stat"))); len(f) > 8 && f[0] == "cpu" {
		for i, v := range f[1:9] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			s.machine += n / clockTicks
		}
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			s.ours += tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
		}
	}
	return s
}

// sectionLoad is what the machine did while one section ran.
type sectionLoad struct {
	Name                               string
	Wall                               time.Duration
	Ours, Server, Redis, Others, Cores float64 // CPU seconds; Others = machine - ours - server - redis
}

func loadBetween(name string, a, b cpuSnapshot, cores int) sectionLoad {
	l := sectionLoad{Name: name, Wall: b.at.Sub(a.at), Ours: b.ours - a.ours, Server: b.server - a.server, Redis: b.redis - a.redis}
	l.Others = max(b.machine-a.machine-l.Ours-l.Server-l.Redis, 0)
	l.Cores = float64(cores)
	return l
}
