package domain

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// parsePackage parses the package's non-test files with comments.
func parsePackage(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestImportsOnlyStandardLibrary keeps the domain pure: a standard library
// import path has no dot in its first element.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	t.Parallel()
	fset, files := parsePackage(t)
	for _, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s; domain may import only the standard library", fset.Position(imp.Pos()), path)
			}
		}
	}
}

// TestExportedNamesHaveDocComments enforces the style rule that every
// exported name has a doc comment starting with its name.
func TestExportedNamesHaveDocComments(t *testing.T) {
	t.Parallel()
	fset, files := parsePackage(t)
	check := func(name string, doc *ast.CommentGroup, pos token.Pos) {
		if !ast.IsExported(name) {
			return
		}
		if doc == nil || !strings.HasPrefix(doc.Text(), name+" ") {
			t.Errorf("%s: %s has no doc comment starting with its name", fset.Position(pos), name)
		}
	}
	hasPackageDoc := false
	for _, f := range files {
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package domain ") {
			hasPackageDoc = true
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); ok && !ast.IsExported(id.Name) {
						continue
					}
				}
				check(d.Name.Name, d.Doc, d.Pos())
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						doc := s.Doc
						if doc == nil {
							doc = d.Doc
						}
						check(s.Name.Name, doc, s.Pos())
						if st, ok := s.Type.(*ast.StructType); ok && ast.IsExported(s.Name.Name) {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									check(n.Name, field.Doc, n.Pos())
								}
							}
						}
					case *ast.ValueSpec:
						doc := s.Doc
						if doc == nil && len(d.Specs) == 1 {
							doc = d.Doc
						}
						for _, n := range s.Names {
							check(n.Name, doc, n.Pos())
						}
					}
				}
			}
		}
	}
	if !hasPackageDoc {
		t.Error("no package doc comment starting with \"Package domain\"")
	}
}
