package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writePackage writes files (name to source) into a new directory and returns it.
func writePackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// problems runs the check on the package in dir.
func problems(t *testing.T, dir string) []string {
	t.Helper()
	files, fset, err := parseDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := references(files, fset)
	if err != nil {
		t.Fatal(err)
	}
	return checkPackage(files, refs)
}

func TestCheckPassesReferencesThatRunDown(t *testing.T) {
	dir := writePackage(t, map[string]string{
		"top.go":      "package p\n\nfunc Top() int { return middle() + bottom }\n",
		"middle.go":   "package p\n\nfunc middle() int { return bottom }\n",
		"bottom.go":   "package p\n\nconst bottom = 1\n",
		"top_test.go": "package p\n\nimport \"testing\"\n\nfunc TestTop(t *testing.T) { _ = Top() }\n",
	})
	if got := problems(t, dir); len(got) != 0 {
		t.Fatalf("a package whose references all run down: %q, want no problem", got)
	}
}

func TestCheckFindsAReferenceThatRunsBackUp(t *testing.T) {
	dir := writePackage(t, map[string]string{
		"a.go": "package p\n\nfunc A() int { return b() }\n\nfunc helper() int { return 1 }\n",
		"b.go": "package p\n\nfunc b() int { return helper() }\n",
	})
	got := problems(t, dir)
	if len(got) != 1 || !strings.Contains(got[0], "runs back up") {
		t.Fatalf("a.go and b.go refer to each other: %q, want one reference that runs back up", got)
	}
}

func TestCheckFindsAFileOverTheLimit(t *testing.T) {
	long := "package p\n\nvar x = 0\n" + strings.Repeat("\n", maxLines)
	dir := writePackage(t, map[string]string{"long.go": long, "short.go": "package p\n\nvar y = x\n"})
	got := problems(t, dir)
	if len(got) != 1 || !strings.Contains(got[0], "long.go has") {
		t.Fatalf("a file of %d lines: %q, want it named", maxLines+3, got)
	}
}
