package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"niuma/assets"
	"niuma/engine/template"
)

// templateInfo is one template a user can launch.
type templateInfo struct {
	Name, Version, Description, Source string
	Err                                error // the template does not parse
}

// userTemplateDir is where a user keeps their own templates, one folder
// each with a template.yaml.
func userTemplateDir(home string) string { return filepath.Join(home, "templates") }

// loadTemplate resolves a bundled template's name, a user template's name,
// or a path to a YAML file.
func loadTemplate(home, ref string) (*template.Template, error) {
	if strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml") || strings.ContainsRune(ref, os.PathSeparator) {
		return template.ParseFile(ref)
	}
	user := filepath.Join(userTemplateDir(home), ref, "template.yaml")
	if _, err := os.Stat(user); err == nil {
		return template.ParseFile(user)
	}
	for _, name := range assets.TemplateNames() {
		if name == ref {
			return loadBundled(home, name)
		}
	}
	return nil, fmt.Errorf("no template %q: give a bundled name (%s), a folder name under %s, or a path to a .yaml file",
		ref, strings.Join(assets.TemplateNames(), ", "), userTemplateDir(home))
}

// loadBundled writes a bundled template's files into the data directory, so
// its commands have real files to run, and parses it from there.
func loadBundled(home, name string) (*template.Template, error) {
	dir := filepath.Join(home, "bundled", name)
	if err := assets.ExtractTemplate(name, dir); err != nil {
		return nil, fmt.Errorf("unpack bundled template %s: %w", name, err)
	}
	t, err := template.ParseFile(filepath.Join(dir, "template.yaml"))
	if err != nil {
		return nil, err
	}
	t.Source = "bundled:" + name
	return t, nil
}

// listTemplates returns the bundled templates and the user's own.
func listTemplates(home string) []templateInfo {
	var out []templateInfo
	for _, name := range assets.TemplateNames() {
		t, err := loadBundled(home, name)
		out = append(out, info(name, "bundled", t, err))
	}
	entries, _ := os.ReadDir(userTemplateDir(home))
	for _, e := range entries {
		path := filepath.Join(userTemplateDir(home), e.Name(), "template.yaml")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		t, err := template.ParseFile(path)
		out = append(out, info(e.Name(), path, t, err))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func info(name, source string, t *template.Template, err error) templateInfo {
	if err != nil {
		return templateInfo{Name: name, Source: source, Err: err}
	}
	return templateInfo{Name: t.Name, Version: t.Version, Description: t.Description, Source: source}
}
