// Command structure prints the shape of one Go package's production code (its .go files but tests
// and generated ones): which file refers to which, the references that run back up (between files
// that refer to each other, through one reference or a chain of them), the largest files and the
// longest functions. Run it from the repository root:
//
//	go run ./scripts/structure            # the root package
//	go run ./scripts/structure internal/delivery
//	go run ./scripts/structure -all internal/dedup   # every reference, files in their order
//	go run ./scripts/structure -check $(go list -f '{{.Dir}}' ./...)
//
// With -check it prints only what is wrong and exits 1 when a package has a reference that runs back
// up or a hand-written production file of more than 600 lines: `make test` runs it over every package.
//
// A file refers to another when it names something that the other declares: a function, type,
// variable, constant, method or struct field of the package, as the type checker resolves the name.
// The type checker reads the package's imports from source, which takes a few seconds.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// maxLines is the most lines a hand-written production file may have.
const maxLines = 600

func main() {
	check := flag.Bool("check", false, "print only what is wrong: references that run back up, files over 600 lines; exit 1 if any")
	all := flag.Bool("all", false, "also print the files in their order and every reference")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	failed := false
	for _, dir := range dirs {
		files, fset, err := parseDir(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if len(files) == 0 {
			continue
		}
		refs, err := references(files, fset)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if *check {
			if problems := checkPackage(files, refs); len(problems) > 0 {
				failed = true
				fmt.Printf("%s:\n%s", dir, strings.Join(problems, ""))
			}
			continue
		}
		if len(dirs) > 1 {
			fmt.Printf("== %s\n", dir)
		}
		if *all {
			printAll(files, refs)
		}
		printReferences(files, refs)
		printSizes(files, fset)
	}
	if failed {
		os.Exit(1)
	}
}

// checkPackage returns a line for each reference that runs back up and each file over maxLines.
func checkPackage(files []*file, refs map[string]map[string][]string) []string {
	var problems []string
	for _, l := range upward(files, refs) {
		problems = append(problems, "  runs back up: "+strings.TrimSpace(l)+"\n")
	}
	for _, f := range files {
		if f.lines > maxLines {
			problems = append(problems, fmt.Sprintf("  %s has %d lines (at most %d)\n", f.name, f.lines, maxLines))
		}
	}
	return problems
}

// printAll prints the files in their layout order, each with the files it refers to.
func printAll(files []*file, refs map[string]map[string][]string) {
	for _, f := range layout(files, refs) {
		tos := make([]string, 0, len(refs[f]))
		for to := range refs[f] {
			tos = append(tos, to)
		}
		sort.Strings(tos)
		fmt.Printf("  %s -> %s\n", f, strings.Join(tos, ", "))
	}
}

type file struct {
	name  string
	ast   *ast.File
	lines int
}

// parseDir parses the package's production files: not tests, not generated code.
func parseDir(dir string) ([]*file, *token.FileSet, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	var files []*file
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		if ast.IsGenerated(f) {
			continue
		}
		files = append(files, &file{name: filepath.Base(n), ast: f, lines: fset.File(f.Pos()).LineCount()})
	}
	return files, fset, nil
}

// references returns, by file, the files it refers to, each with the names it takes from there.
func references(files []*file, fset *token.FileSet) (map[string]map[string][]string, error) {
	asts := make([]*ast.File, len(files))
	for i, f := range files {
		asts[i] = f.ast
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(error) {}}
	pkg, err := conf.Check(asts[0].Name.Name, fset, asts, info)
	if pkg == nil {
		return nil, err
	}
	refs := map[string]map[string][]string{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		from, to := filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to || !slices.ContainsFunc(files, func(f *file) bool { return f.name == to }) {
			continue
		}
		if refs[from] == nil {
			refs[from] = map[string][]string{}
		}
		refs[from][to] = appendOnce(refs[from][to], obj.Name())
	}
	return refs, nil
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// printReferences prints how many references run back up: with the files laid out top to bottom
// so that as few references as a greedy search finds (Eades, Lin and Smyth's) run from a file to one
// above it. Those, the references between files that refer to each other, through one reference or
// a chain of them, are listed: in a package without them, every reference runs down.
func printReferences(files []*file, refs map[string]map[string][]string) {
	total := 0
	for _, tos := range refs {
		total += len(tos)
	}
	up := upward(files, refs)
	fmt.Printf("%d files, %d references between them (file to file), %d of them run back up:\n", len(files), total, len(up))
	for _, l := range up {
		fmt.Println(l)
	}
}

// upward returns the references that run back up, a line each, sorted.
func upward(files []*file, refs map[string]map[string][]string) []string {
	order := layout(files, refs)
	pos := map[string]int{}
	for i, f := range order {
		pos[f] = i
	}
	var up []string
	for from, tos := range refs {
		for to, names := range tos {
			if pos[to] < pos[from] {
				sort.Strings(names)
				up = append(up, fmt.Sprintf("  %s -> %s: %s", from, to, strings.Join(names, ", ")))
			}
		}
	}
	sort.Strings(up)
	return up
}

// layout orders the files top to bottom, greedily, so that few references run up: files that no
// other refers to first, files that refer to none last, and of the rest the one that refers to the
// most more than it is referred to.
func layout(files []*file, refs map[string]map[string][]string) []string {
	left := map[string]bool{}
	for _, f := range files {
		left[f.name] = true
	}
	degree := func(n string) (in, out int) {
		for to := range refs[n] {
			if left[to] {
				out++
			}
		}
		for from := range left {
			if _, ok := refs[from][n]; ok {
				in++
			}
		}
		return in, out
	}
	var top, bottom []string
	for len(left) > 0 {
		names := make([]string, 0, len(left))
		for n := range left {
			names = append(names, n)
		}
		sort.Strings(names) // a stable result
		moved := false
		for _, n := range names {
			if in, out := degree(n); out == 0 {
				bottom, moved = append([]string{n}, bottom...), true
				delete(left, n)
			} else if in == 0 {
				top, moved = append(top, n), true
				delete(left, n)
			}
		}
		if moved {
			continue
		}
		best, bestD := "", 0
		for _, n := range names {
			in, out := degree(n)
			if d := out - in; best == "" || d > bestD {
				best, bestD = n, d
			}
		}
		top = append(top, best)
		delete(left, best)
	}
	return append(top, bottom...)
}

// printSizes prints the five largest files and the five longest functions.
func printSizes(files []*file, fset *token.FileSet) {
	sorted := slices.Clone(files)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].lines > sorted[j].lines })
	fmt.Println("largest files (lines):")
	for _, f := range sorted[:min(5, len(sorted))] {
		fmt.Printf("  %5d %s\n", f.lines, f.name)
	}
	type fn struct {
		name  string
		lines int
	}
	var fns []fn
	for _, f := range files {
		for _, d := range f.ast.Decls {
			if d, ok := d.(*ast.FuncDecl); ok && d.Body != nil {
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) > 0 {
					name = fmt.Sprintf("(%s).%s", typeName(d.Recv.List[0].Type), name)
				}
				n := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				fns = append(fns, fn{f.name + ":" + name, n})
			}
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	fmt.Println("longest functions (lines):")
	for _, f := range fns[:min(5, len(fns))] {
		fmt.Printf("  %5d %s\n", f.lines, f.name)
	}
}

// typeName is a receiver's type, as written without its package.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	}
	return "?"
}
