"""Derive tests/fixtures/dockerignore/cases.json: what Docker's own .dockerignore matcher answers.

components/images/context.py ports moby/patternmatcher to Python so the image tag hashes exactly the files Docker
sends. This script asks the Go original (``ignorefile.ReadAll``, ``New``, and ``MatchesUsingParentResults`` walked
folder by folder as BuildKit's context walker does it; ``MatchesOrParentMatches`` beside it) about:

- every case of patternmatcher's own tests (``TestMatches``' single and multi-pattern tables, the ``matchTests``
  taken from Go's filepath tests, ``ignorefile.TestReadAll``), parsed from its test files, with its answer, not
  the table's expectation (the script reports any case where the two differ);
- the project's .dockerignore files (docker/*/.dockerignore) against their files and paths a change could add;
- the cases a fnmatch-style matcher gets wrong (``*`` crossing ``/``, a re-include below an excluded folder).

Usage (Go 1.19 or newer; no network)::

    git clone https://github.com/moby/patternmatcher && git -C patternmatcher checkout v0.6.1
    python scripts/derive_dockerignore_cases.py patternmatcher

The fixture records the commit it came from; tests/test_build_context.py holds the Python port to every answer.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

from go_original import checkout_version, go_run

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "dockerignore" / "cases.json"

GO_MAIN = r'''package main

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

type matchCase struct {
	Text     string   `json:"text,omitempty"` // a whole .dockerignore, read with ignorefile.ReadAll
	Patterns []string `json:"patterns"`
	Paths    []string `json:"paths"`
	Source   string   `json:"source"`
}

type input struct {
	Match  []matchCase `json:"match"`
	Ignore []string    `json:"ignore"`
}

type answer struct {
	Path     string `json:"path"`
	Excluded bool   `json:"excluded"`
	// Where MatchesOrParentMatches (one call with the whole path) answers otherwise than the walk.
	OrParent *bool `json:"or_parent,omitempty"`
}

type matchResult struct {
	Text     string   `json:"text,omitempty"`
	Patterns []string `json:"patterns"`
	Source   string   `json:"source"`
	Error    string   `json:"error,omitempty"`
	Answers  []answer `json:"answers,omitempty"`
}

type ignoreResult struct {
	Text     string   `json:"text"`
	Patterns []string `json:"patterns"`
}

// walked asks as BuildKit's walker does: each folder of the path first, its results passed to the next.
func walked(pm *patternmatcher.PatternMatcher, path string) (bool, error) {
	parts := strings.Split(path, "/")
	var info patternmatcher.MatchInfo
	var excluded bool
	var err error
	for i := range parts {
		excluded, info, err = pm.MatchesUsingParentResults(strings.Join(parts[:i+1], "/"), info)
		if err != nil {
			return false, err
		}
	}
	return excluded, nil
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		panic(err)
	}
	out := struct {
		Match  []matchResult  `json:"match"`
		Ignore []ignoreResult `json:"ignore"`
	}{}
	for _, c := range in.Match {
		if c.Text != "" {
			patterns, err := ignorefile.ReadAll(strings.NewReader(c.Text))
			if err != nil {
				panic(err)
			}
			c.Patterns = patterns
		}
		r := matchResult{Text: c.Text, Patterns: c.Patterns, Source: c.Source}
		pm, err := patternmatcher.New(c.Patterns)
		if err == nil {
			for _, p := range c.Paths {
				w, werr := walked(pm, p)
				o, oerr := pm.MatchesOrParentMatches(p)
				if werr != nil || oerr != nil {
					err = werr
					if err == nil {
						err = oerr
					}
					break
				}
				a := answer{Path: p, Excluded: w}
				if o != w {
					a.OrParent = &o
				}
				r.Answers = append(r.Answers, a)
			}
		}
		if err != nil {
			r.Error = err.Error()
			r.Answers = nil
		}
		out.Match = append(out.Match, r)
	}
	for _, text := range in.Ignore {
		patterns, err := ignorefile.ReadAll(strings.NewReader(text))
		if err != nil {
			panic(err)
		}
		out.Ignore = append(out.Ignore, ignoreResult{Text: text, Patterns: patterns})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
'''

GO_STRING = r'"(?:[^"\\]|\\.)*"'


def go_string(literal: str) -> str:
    """A Go interpreted string literal's value (its escapes here are Python's: \\\\ and \\")."""
    return ast.literal_eval(literal)


def block(source: str, header: str) -> str:
    """The body of the composite literal that starts at ``header``, up to its matching closing brace."""
    start = source.index(header) + len(header)
    depth, i = 1, start
    while depth:
        ch = source[i]
        if ch == '"':
            i = re.compile(GO_STRING).match(source, i).end()
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        i += 1
    return source[start:i - 1]


def upstream_cases(checkout: Path) -> tuple[list[dict], list[str], list[tuple[str, bool]]]:
    """patternmatcher's own test cases: (match cases, ignore-file texts, the table's expectations)."""
    tests = (checkout / "patternmatcher_test.go").read_text()
    single = re.compile(rf"\{{({GO_STRING}),\s*({GO_STRING}),\s*(true|false)(?:,\s*[\w.]+)?\}}")
    multi = re.compile(rf"\{{\[\]string\{{((?:{GO_STRING},?\s*)+)\}},\s*({GO_STRING}),\s*(true|false)\}}")
    cases, expected = [], []
    tables = [("TestMatches", block(tests, "tests := []matchesTestCase{")),
              ("TestMatches (not Windows)", block(tests, "tests = append(tests, []matchesTestCase{")),
              ("matchTests", block(tests, "var matchTests = []matchTest{"))]
    for source, body in tables:
        for pattern, text, passes in single.findall(body):
            cases.append({"patterns": [go_string(pattern)], "paths": [go_string(text)],
                          "source": f"patternmatcher_test.go {source}"})
            expected.append((source, passes == "true"))
    for patterns, text, passes in multi.findall(block(tests, "multiPatternTests := []multiPatternTestCase{")):
        cases.append({"patterns": [go_string(p) for p in re.findall(GO_STRING, patterns)],
                      "paths": [go_string(text)], "source": "patternmatcher_test.go TestMatches (multi)"})
        expected.append(("TestMatches (multi)", passes == "true"))
    readall = (checkout / "ignorefile" / "ignorefile_test.go").read_text()
    content = re.search(r"const content = `([^`]*)`", readall)[1]
    return cases, [content], expected


PROBES = ["Dockerfile", ".dockerignore", "notes.md", "app.py", "sub/app.py", "sub/Dockerfile", "sub/deeper/x.py",
          "requirements.txt", "sub/requirements.txt", "__pycache__/app.cpython-312.pyc", "tests/test_app.py"]
"""Paths a change to an image folder could add, asked of each project .dockerignore besides its files."""

SEMANTICS = [
    (["*.tmp"], ["a.tmp", "sub/a.tmp", "sub/deeper/a.tmp"]),
    (["**/*.tmp"], ["a.tmp", "sub/a.tmp", "sub/deeper/a.tmp"]),
    (["*", "!*.py"], ["x.py", "lib", "lib/x.py", "notes.md"]),
    (["*", "!**/*.py"], ["x.py", "lib", "lib/x.py", "notes.md"]),
    (["notes", "!notes/keep.md"], ["notes/keep.md", "notes/other.md", "notes/sub/keep.md"]),
    (["notes/*", "!notes/keep.md"], ["notes/keep.md", "notes/other.md", "notes"]),
    (["/build", "!build/keep.txt"], ["build/keep.txt", "build/drop.txt", "sub/build/x"]),
    (["sub", "!sub/keep", "sub/keep/drop"], ["sub/keep/x", "sub/keep/drop/y", "sub/other"]),
    (["**/__pycache__", "*.pyc"], ["__pycache__/a.pyc", "pkg/__pycache__/a.pyc", "a.pyc", "pkg/a.pyc"]),
    (["a/**/b"], ["a/b", "a/x/b", "a/x/y/b/c", "b"]),
    (["?.py", "[a-c]?.txt", "\\*.md"], ["x.py", "xy.py", "b1.txt", "d1.txt", "*.md", "a.md"]),
    (["!keep", "*"], ["keep", "other"]),
    (["[z-a]"], ["x"]),
    (["!"], ["x"]),
    (["sub/", "!sub/keep.py"], ["sub/keep.py", "sub/x.py"]),
    (["./sub/../tmp//*"], ["tmp/x", "sub/tmp/x"]),
]
"""What a matcher with other semantics (Python's fnmatch: ``*`` crosses ``/``) gets wrong, and the edges."""


def project_cases() -> tuple[list[dict], list[str]]:
    cases = []
    for ignore in sorted(ROOT.glob("docker/*/.dockerignore")):
        files = subprocess.run(["git", "ls-files", "--", "."], cwd=ignore.parent, capture_output=True, text=True,
                               check=True).stdout.split()
        cases.append({"text": ignore.read_text(), "patterns": [], "paths": sorted(set(files) | set(PROBES)),
                      "source": f"{ignore.relative_to(ROOT)}"})
    cases += [{"patterns": patterns, "paths": paths, "source": "semantics"} for patterns, paths in SEMANTICS]
    return cases, ["\ufeff# a comment\r\n/build\r\n  !  /build/keep  \r\n#!not-a-rule\r\ndist/**/\n"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a moby/patternmatcher checkout (folder with go.mod)")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    commit, tag = checkout_version(checkout)
    upstream, upstream_texts, expected = upstream_cases(checkout)
    ours, our_texts = project_cases()
    answers = json.loads(go_run(checkout, "github.com/moby/patternmatcher", "v0.0.0", GO_MAIN,
                                json.dumps({"match": upstream + ours, "ignore": upstream_texts + our_texts})))
    for (table, passes), case in zip(expected, answers["match"], strict=False):
        got = case["answers"][0]["excluded"] if case.get("answers") else None
        if case.get("error") is None and got != passes:
            print(f"note: {table} expects {passes} for {case['patterns']} but the walk answers {got}")
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps({
        "source": f"github.com/moby/patternmatcher {tag} ({commit})",
        "generator": "scripts/derive_dockerignore_cases.py",
        "match": answers["match"],
        "ignore": answers["ignore"],
    }, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)}: {len(answers['match'])} pattern sets, "
          f"{sum(len(c.get('answers') or []) for c in answers['match'])} paths, {len(answers['ignore'])} files")


if __name__ == "__main__":
    main()
