package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the benchmarks ran.
type machine struct {
	CPU, Kernel, Memory, Go, Node, Java, DynamoDBLocal string
	Cores                                              int
	// DynamoDBLocalFound: the server's process was found on this machine
	// (its CPU time is reported); InMemory: it runs with -inMemory.
	DynamoDBLocalFound, InMemory bool
	// Powertools holds the installed versions of bench/powertools' packages.
	Powertools map[string]string
}

// powertoolsPackages are bench/powertools' dependencies, as reported.
var powertoolsPackages = []string{"@aws-lambda-powertools/idempotency", "@aws-sdk/client-dynamodb", "@aws-sdk/lib-dynamodb"}

// installedVersion reads the version of an npm package installed under dir.
func installedVersion(dir, pkg string) string {
	var p struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
	if err != nil || json.Unmarshal(b, &p) != nil || p.Version == "" {
		return "not installed"
	}
	return p.Version
}

func describeMachine(root string, serverPID int) machine {
	m := machine{
		CPU:           cpuModel(),
		Cores:         runtime.NumCPU(),
		Kernel:        firstLine(readFile("/proc/sys/kernel/osrelease")),
		Memory:        memTotal(),
		Go:            firstLine(output(root, "go", "version")),
		Node:          firstLine(output(root, "node", "--version")),
		Java:          firstLine(output(root, "java", "-version")),
		DynamoDBLocal: dynamoDBLocalVersion(serverPID),
		Powertools:    map[string]string{},
	}
	if serverPID > 0 {
		m.DynamoDBLocalFound = true
		m.InMemory = strings.Contains(readFile(fmt.Sprintf("/proc/%d/cmdline", serverPID)), "-inMemory")
	}
	for _, pkg := range powertoolsPackages {
		m.Powertools[pkg] = installedVersion(filepath.Join(root, "bench", "powertools"), pkg)
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	for _, line := range strings.Split(readFile("/proc/meminfo"), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				return strings.TrimSpace(v)
			}
			return fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	return "unknown"
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func output(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "unavailable"
	}
	return string(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
