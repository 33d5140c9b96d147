package skills

import (
	"bytes"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Report is what a static look at a revision found: its scripts by
// language, the hosts its files name and strings that look like secrets.
// It informs a reviewer; it enforces nothing (the run's policy does).
type Report struct {
	// Scripts maps a language (python, shell, node, other) to the paths of
	// the revision's scripts in it.
	Scripts map[string][]string `json:"scripts"`
	// Hosts are the distinct hosts of the URLs in its text files.
	Hosts []string `json:"hosts"`
	// URLs are the distinct URLs (at most 100).
	URLs []string `json:"urls"`
	// Secrets are secret-like strings: where and what kind, never the value.
	Secrets []SecretFinding `json:"secrets"`
	// Undeclared are hosts the files name that the manifest's network
	// does not declare (a script that reaches one will fail).
	Undeclared []string `json:"undeclared_hosts"`
}

// SecretFinding is one secret-like string.
type SecretFinding struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Kind string `json:"kind"`
}

// Language is the language of a script: by extension, else by its #! line;
// "" when the file is not a script.
func Language(p string, head []byte) string {
	switch path.Ext(p) {
	case ".py":
		return "python"
	case ".sh", ".bash":
		return "shell"
	case ".js", ".mjs", ".cjs":
		return "node"
	}
	if line, _, _ := bytes.Cut(head, []byte("\n")); bytes.HasPrefix(line, []byte("#!")) {
		switch s := string(line); {
		case strings.Contains(s, "python"):
			return "python"
		case strings.Contains(s, "node"):
			return "node"
		case strings.Contains(s, "sh"):
			return "shell"
		default:
			return "other"
		}
	}
	return ""
}

var (
	urlRE     = regexp.MustCompile(`https?://[A-Za-z0-9._~%!$&'()*+,;=:@\[\]/?#-]+`)
	secretREs = []struct {
		kind string
		re   *regexp.Regexp
	}{
		{"private_key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
		{"aws_access_key", regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)},
		{"github_token", regexp.MustCompile(`\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}\b|\bgithub_pat_[A-Za-z0-9_]{22,}\b`)},
		{"slack_token", regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}\b`)},
		{"api_key", regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}\b`)},
		{"assignment", regexp.MustCompile(`(?i)\b(api[_-]?key|secret|token|passw(or)?d)\b\s*[:=]\s*["'][^"'\s]{8,}["']`)},
	}
)

// Analyze builds the report of a bundle.
func Analyze(b *Bundle) Report {
	r := Report{Scripts: map[string][]string{}, Hosts: []string{}, URLs: []string{}, Secrets: []SecretFinding{}, Undeclared: []string{}}
	hosts := map[string]bool{}
	urls := map[string]bool{}
	for _, f := range b.Files {
		head := f.data[:min(len(f.data), 256)]
		if lang := Language(f.Path, head); lang != "" {
			r.Scripts[lang] = append(r.Scripts[lang], f.Path)
		}
		if bytes.IndexByte(head, 0) >= 0 {
			continue // binary
		}
		for i, line := range bytes.Split(f.data, []byte("\n")) {
			for _, m := range urlRE.FindAll(line, -1) {
				u, err := url.Parse(strings.TrimRight(string(m), ".,;:)'\""))
				if err != nil || u.Hostname() == "" {
					continue
				}
				hosts[strings.ToLower(u.Hostname())] = true
				if len(urls) < 100 {
					urls[u.String()] = true
				}
			}
			for _, s := range secretREs {
				if s.re.Match(line) {
					r.Secrets = append(r.Secrets, SecretFinding{Path: f.Path, Line: i + 1, Kind: s.kind})
				}
			}
		}
	}
	declared := map[string]bool{}
	for _, h := range b.Manifest.Network {
		host := h
		if hp, _, err := net.SplitHostPort(h); err == nil {
			host = hp
		}
		declared[strings.ToLower(strings.Trim(host, "[]"))] = true
	}
	for h := range hosts {
		r.Hosts = append(r.Hosts, h)
		if !declared[h] {
			r.Undeclared = append(r.Undeclared, h)
		}
	}
	for u := range urls {
		r.URLs = append(r.URLs, u)
	}
	slices.Sort(r.Hosts)
	slices.Sort(r.Undeclared)
	slices.Sort(r.URLs)
	return r
}
