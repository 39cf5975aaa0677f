package assets

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed icon.png templates
var files embed.FS

// templatesRoot is the directory inside files that holds one folder per template.
const templatesRoot = "templates"

// ErrUnknownTemplate is returned (wrapped) by ExtractTemplate for a name that is
// not a bundled template.
var ErrUnknownTemplate = errors.New("unknown template")

// Icon returns the application icon: a 512x512 PNG. Each call returns a fresh
// copy that the caller may keep or modify.
func Icon() []byte {
	b, err := files.ReadFile("icon.png")
	if err != nil {
		panic("assets: icon.png missing from the embedded files: " + err.Error())
	}
	return b
}

// Templates returns the bundled templates as a read-only file system rooted so
// that each template is a top-level directory, e.g. "digits-mlp/template.yaml".
func Templates() fs.FS {
	sub, err := fs.Sub(files, templatesRoot)
	if err != nil {
		panic("assets: templates missing from the embedded files: " + err.Error())
	}
	return sub
}

// TemplateNames returns the sorted names of the bundled templates: the
// top-level directories of Templates that contain a template.yaml.
func TemplateNames() []string {
	entries, err := fs.ReadDir(files, templatesRoot)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := fs.Stat(files, path.Join(templatesRoot, e.Name(), "template.yaml")); err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// ExtractTemplate writes the directory tree of the bundled template name into
// dir, creating dir and its sub-directories as needed (mode 0755, less the
// umask) and overwriting existing files. Files get mode 0644; each is written to
// a temporary file in its destination directory and renamed into place, so a
// reader never sees half a file. Files in dir that the template does not have
// are left alone. Extracting twice gives the same result.
func ExtractTemplate(name, dir string) error {
	if !isTemplate(name) {
		return fmt.Errorf("extract template %q: %w (bundled templates: %s)",
			name, ErrUnknownTemplate, strings.Join(TemplateNames(), ", "))
	}
	if dir == "" {
		return fmt.Errorf("extract template %q: no destination directory given", name)
	}
	src := Templates()
	err := fs.WalkDir(src, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, name), "/")
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return writeFileAtomic(target, data)
	})
	if err != nil {
		return fmt.Errorf("extract template %q into %s: %w", name, dir, err)
	}
	return nil
}

func isTemplate(name string) bool {
	if name == "" || name == "." || strings.ContainsAny(name, `/\`) || !fs.ValidPath(name) {
		return false
	}
	_, err := fs.Stat(files, path.Join(templatesRoot, name, "template.yaml"))
	return err == nil
}

// writeFileAtomic writes data to path with mode 0644 via a temporary file in
// the same directory and a rename.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
