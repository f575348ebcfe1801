// Command spanpath measures the path of one span through the component: the project's functions that
// the collector's call of a traces instance reaches, by the call graph of golang.org/x/tools (VTA,
// which follows function values and interfaces), then the files and packages they are in and the
// calls between them. Two paths: "metrics" (a traces->metrics connector's ConsumeTraces, with the
// component's goroutines that collect, checkpoint and send what fires) and "late" (a traces->traces
// connector's, which routes late spans). The body of a function includes the closures written in it
// (a range-over-func loop's body is one, called by an iterator outside the project). It counts the
// calls that run against the imports (a package calling up into one that imports it: a callback).
//
// Run it from this directory (its own module, so that the component does not depend on x/tools):
//
//	go run . -dir ../..          # both paths
//	go run . -dir ../.. -v late  # with the files and the calls between files
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/cha"
	"golang.org/x/tools/go/callgraph/vta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

const module = "github.com/windowaggregator/windowaggregator"

var paths = map[string][]string{
	"metrics": {
		"(" + module + ".tracesToMetrics).ConsumeTraces",
		"(*" + module + ".shared).tick",
		"(*" + module + "/internal/delivery.Emitter).Run",
	},
	"late": {"(" + module + ".tracesToTraces).ConsumeTraces"},
}

func main() {
	dir := flag.String("dir", "../..", "the component's module directory")
	verbose := flag.Bool("v", false, "list the files and the calls between files")
	flag.Parse()
	names := flag.Args()
	if len(names) == 0 {
		names = []string{"metrics", "late"}
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.LoadAllSyntax, Dir: *dir}, "./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	prog, _ := ssautil.AllPackages(pkgs, ssa.InstantiateGenerics)
	prog.Build()
	cg := vta.CallGraph(ssautil.AllFunctions(prog), cha.CallGraph(prog))
	byName := map[string]*callgraph.Node{}
	for f, n := range cg.Nodes {
		if f != nil {
			byName[f.String()] = n
		}
	}
	imports := importsOf(pkgs)
	for _, name := range names {
		var starts []*callgraph.Node
		for _, e := range paths[name] {
			n := byName[e]
			if n == nil {
				fmt.Fprintf(os.Stderr, "%s: no function %s\n", name, e)
				os.Exit(1)
			}
			starts = append(starts, n)
		}
		report(name, walk(prog, cg, starts), imports, *verbose)
	}
}

// reached are the project's files a path reaches, and the calls between two of them.
type reached struct {
	files map[string]bool
	calls map[[2]string]bool
}

// walk follows the calls from starts through the project's functions, seeing through the wrappers
// the compiler makes, and stopping at functions outside the project.
func walk(prog *ssa.Program, cg *callgraph.Graph, starts []*callgraph.Node) reached {
	r := reached{files: map[string]bool{}, calls: map[[2]string]bool{}}
	seen := map[*callgraph.Node]bool{}
	var visit func(n *callgraph.Node, caller string)
	visit = func(n *callgraph.Node, caller string) {
		here := fileOf(prog, n.Func)
		switch {
		case here == "" && n.Func != nil && n.Func.Synthetic != "":
			here = caller
		case here == "" || strings.HasSuffix(here, "_test.go"):
			return
		}
		if caller != "" && here != caller {
			r.calls[[2]string{caller, here}] = true
		}
		if seen[n] {
			return
		}
		seen[n] = true
		if here != "" {
			r.files[here] = true
		}
		for _, e := range n.Out {
			visit(e.Callee, here)
		}
		if n.Func != nil {
			for _, af := range n.Func.AnonFuncs {
				if an := cg.Nodes[af]; an != nil {
					visit(an, here)
				}
			}
		}
	}
	for _, s := range starts {
		visit(s, "")
	}
	return r
}

// fileOf is the file of a project function, relative to the module ("" outside it).
func fileOf(prog *ssa.Program, f *ssa.Function) string {
	if f == nil || f.Pkg == nil || !strings.HasPrefix(f.Pkg.Pkg.Path(), module) {
		return ""
	}
	pos := f.Pos()
	if f.Origin() != nil {
		pos = f.Origin().Pos()
	}
	for p := f; !pos.IsValid() && p.Parent() != nil; p = p.Parent() {
		pos = p.Parent().Pos()
	}
	if !pos.IsValid() {
		return ""
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(f.Pkg.Pkg.Path(), module), "/")
	return filepath.Join(rel, filepath.Base(prog.Fset.Position(pos).Filename))
}

// importsOf returns, by project package directory, the project packages it imports, directly or not.
func importsOf(pkgs []*packages.Package) map[string]map[string]bool {
	dirOf := func(path string) string {
		if d := strings.TrimPrefix(strings.TrimPrefix(path, module), "/"); d != "" {
			return d
		}
		return "."
	}
	imports := map[string]map[string]bool{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if !strings.HasPrefix(p.PkgPath, module) {
			return
		}
		m := map[string]bool{}
		for _, q := range p.Imports {
			if strings.HasPrefix(q.PkgPath, module) {
				m[dirOf(q.PkgPath)] = true
				for t := range imports[dirOf(q.PkgPath)] {
					m[t] = true
				}
			}
		}
		imports[dirOf(p.PkgPath)] = m
	})
	return imports
}

func report(name string, r reached, imports map[string]map[string]bool, verbose bool) {
	pkgCalls, pkgs := map[[2]string]bool{}, map[string]bool{}
	for c := range r.calls {
		a, b := filepath.Dir(c[0]), filepath.Dir(c[1])
		pkgs[a], pkgs[b] = true, true
		if a != b {
			pkgCalls[[2]string{a, b}] = true
		}
	}
	var up []string
	for c := range pkgCalls {
		if imports[c[1]][c[0]] {
			up = append(up, c[0]+" -> "+c[1])
		}
	}
	sort.Strings(up)
	fmt.Printf("%s: %d files, %d calls between files; %d packages, %d calls between packages, %d of them against the imports (callbacks)\n",
		name, len(r.files), len(r.calls), len(pkgs), len(pkgCalls), len(up))
	for _, u := range up {
		fmt.Println("  callback:", u)
	}
	if !verbose {
		return
	}
	var files, calls []string
	for f := range r.files {
		files = append(files, f)
	}
	for c := range r.calls {
		calls = append(calls, c[0]+" -> "+c[1])
	}
	sort.Strings(files)
	sort.Strings(calls)
	for _, f := range files {
		fmt.Println("  file:", f)
	}
	for _, c := range calls {
		fmt.Println("  call:", c)
	}
}
