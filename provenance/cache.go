package provenance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Cache remembers content hashes by absolute path, size and modification
// time, so that a file that has not changed is not read again. It is kept
// in one JSON file (Load, Save). A file rewritten in place within the same
// nanosecond with the same size would go unnoticed: that is the price of not
// reading a 50 GB dataset at every submit, the same one make and rsync pay.
//
// The zero value works without a file. A Cache is safe for concurrent use.
type Cache struct {
	path string
	mu   sync.Mutex
	m    map[string]string // key → hex sha256
	used map[string]bool   // keys looked up or added since Load
}

// LoadCache reads the cache file at path; a missing or unreadable file
// starts an empty cache (it is only a cache). path "" keeps it in memory.
func LoadCache(path string) *Cache {
	c := &Cache{path: path, m: map[string]string{}, used: map[string]bool{}}
	if path == "" {
		return c
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	var m map[string]string
	if json.Unmarshal(b, &m) == nil && m != nil {
		c.m = m
	}
	return c
}

// Save writes the cache file (atomically: a temp file renamed over it).
// Entries of files that were deleted or changed since are dropped, so they
// do not accumulate: an entry not used since LoadCache is kept only while
// its file still has the size and modification time of its key.
func (c *Cache) Save() error {
	if c == nil || c.path == "" {
		return nil
	}
	c.mu.Lock()
	keep := make(map[string]string, len(c.m))
	for k, h := range c.m {
		if c.used[k] || stillValid(k) {
			keep[k] = h
		}
	}
	c.mu.Unlock()
	b, err := json.Marshal(keep)
	if err != nil {
		return fmt.Errorf("encode hash cache: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return fmt.Errorf("save hash cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".hashcache-*")
	if err != nil {
		return fmt.Errorf("save hash cache: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save hash cache %s: %w", c.path, err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save hash cache %s: %w", c.path, err)
	}
	return nil
}

// stillValid reports whether the file of a cache key is unchanged.
func stillValid(key string) bool {
	abs, _, ok := strings.Cut(key, "\x00")
	if !ok {
		return false
	}
	fi, err := os.Stat(abs)
	return err == nil && cacheKey(abs, fi) == key
}

func cacheKey(abs string, fi fs.FileInfo) string {
	return abs + "\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// FileHash returns the hex SHA-256 of the file at path, from the cache when
// its size and modification time are those of a hash already taken. fi is
// the file's Lstat/Stat result (nil: it is taken here).
func (c *Cache) FileHash(path string, fi fs.FileInfo) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	if fi == nil {
		if fi, err = os.Stat(abs); err != nil {
			return "", fmt.Errorf("hash %s: %w", path, err)
		}
	}
	key := cacheKey(abs, fi)
	if c != nil {
		c.mu.Lock()
		h, ok := c.m[key]
		if ok {
			c.used[key] = true
		}
		c.mu.Unlock()
		if ok {
			return h, nil
		}
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	hw := sha256.New()
	if _, err := io.Copy(hw, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	h := hex.EncodeToString(hw.Sum(nil))
	if c != nil {
		c.mu.Lock()
		if c.m == nil {
			c.m, c.used = map[string]string{}, map[string]bool{}
		}
		c.m[key] = h
		c.used[key] = true
		c.mu.Unlock()
	}
	return h, nil
}
