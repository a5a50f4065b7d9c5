package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/orchard-rl/orchard/"

// forbidden maps a tree of the repository to the trees its packages (tests
// included) must not import.
var forbidden = map[string][]string{
	"proxy":       {"reconstruct", "rl", "envd", "cmd"},
	"recorder":    {"proxy", "reconstruct", "rl", "envd", "cmd"},
	"reconstruct": {"proxy", "rl", "envd", "cmd"},
	"envd":        {"proxy", "recorder", "reconstruct", "rl", "cmd"},
	"rl":          {"proxy", "cmd"},
	"internal":    {"proxy", "recorder", "reconstruct", "rl", "envd", "cmd"},
	"deploy":      {"cmd"},
}

// forbiddenDir maps one package to packages it must not import, besides
// its tree's: the proxy takes the episode API's verifier through an
// interface of its own, and cmd mounts the two side by side.
var forbiddenDir = map[string][]string{
	"proxy": {"proxy/episodes"},
}

// pkg is one directory's Go package as the tests see it.
type pkg struct {
	dir     string // relative to the module root, slash-separated
	name    string
	doc     bool // a non-test file carries a package doc
	testDoc bool // a test file does (enough for a package of tests only)
	code    bool // the package has non-test files
	imports map[string][]string
}

func TestImportRules(t *testing.T) {
	for _, p := range loadPackages(t) {
		top, _, _ := strings.Cut(p.dir, "/")
		for _, bad := range slices.Concat(forbidden[top], forbiddenDir[p.dir]) {
			for imp, files := range p.imports {
				if imp == bad || strings.HasPrefix(imp, bad+"/") {
					t.Errorf("%s imports %s (%s): %s must not import %s", p.dir, imp, strings.Join(files, ", "), top, bad)
				}
			}
		}
	}
}

func TestEveryPackageHasADoc(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !p.doc && (p.code || !p.testDoc) {
			t.Errorf("%s (package %s) has no package doc: add a doc.go stating its contract", p.dir, p.name)
		}
	}
}

// loadPackages parses the package clause, doc and imports of every Go file
// of the module.
func loadPackages(t *testing.T) []*pkg {
	t.Helper()
	root := moduleRoot(t)
	byDir := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, root, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return addFile(fset, root, path, byDir)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*pkg, 0, len(byDir))
	for _, p := range byDir {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	if len(out) < 10 {
		t.Fatalf("found only %d packages under %s", len(out), root)
	}
	return out
}

// skipDir reports whether a directory holds no packages of the module.
func skipDir(path, root, name string) bool {
	if path == root {
		return false
	}
	if name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

func addFile(fset *token.FileSet, root, path string, byDir map[string]*pkg) error {
	f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(root, filepath.Dir(path))
	rel = filepath.ToSlash(rel)
	test := strings.HasSuffix(path, "_test.go")
	key := rel
	if test && strings.HasSuffix(f.Name.Name, "_test") {
		key = rel + " (external test)"
	}
	p := byDir[key]
	if p == nil {
		p = &pkg{dir: rel, name: f.Name.Name, imports: map[string][]string{}}
		byDir[key] = p
	}
	if test && key != rel {
		p.doc = true // external test packages carry no doc of their own
	}
	hasDoc := f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != ""
	if test {
		p.testDoc = p.testDoc || hasDoc
	} else {
		p.code = true
		p.doc = p.doc || hasDoc
	}
	for _, is := range f.Imports {
		imp, _ := strconv.Unquote(is.Path.Value)
		if rest, ok := strings.CutPrefix(imp, module); ok {
			p.imports[rest] = append(p.imports[rest], filepath.Base(path))
		}
	}
	return nil
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// heavy lists packages no orchard binary may link, with why.
var heavy = map[string]string{
	// Its scheme registers every API group of Kubernetes; initialising it
	// kept about 15 MB of every orchard process resident (the proxy's
	// included) and doubled the binary, for a backend that only touches
	// pods (envd/kube reaches them through a core/v1 REST client).
	"k8s.io/client-go/kubernetes/scheme": "the generated clientset's scheme (use a core/v1 REST client, as envd/kube does)",
	"k8s.io/client-go/informers":         "the generated informer factory (use cache.NewSharedIndexInformer over a ListWatch)",
}

func TestBinariesLeaveOutHeavyPackages(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/...", "./envd/agent/cmd/...")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "k8s.io/client-go/rest") {
		t.Fatalf("go list -deps named %d packages, none of them k8s.io/client-go/rest: the check would prove nothing", len(deps))
	}
	for _, d := range deps {
		if why, ok := heavy[d]; ok {
			t.Errorf("a binary links %s: %s", d, why)
		}
	}
}
