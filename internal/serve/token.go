package serve

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFileName is the file in the data directory that holds the token a
// daemon generated for itself (when the settings name no token_file).
// claudectl's client commands of the same user read it by themselves when
// the data directory is the settings file's data_dir or the default one.
const TokenFileName = "token"

// TokenPath is where a daemon with data directory dataDir keeps its
// generated token.
func TokenPath(dataDir string) string { return filepath.Join(dataDir, TokenFileName) }

// loadOrCreateToken returns the generated token of the data directory,
// making one (32 random bytes, hex, in a 0600 file) at the first start.
func loadOrCreateToken(dataDir string) (string, error) {
	path := TokenPath(dataDir)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 32)
		rand.Read(raw)
		token := hex.EncodeToString(raw)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("creating the token file %s: %w", path, err)
		}
		_, werr := f.WriteString(token + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return "", fmt.Errorf("writing the token file %s: %w", path, err)
		}
		return token, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the token file %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("the token file %s is empty: remove it and a new token is made at the next start", path)
	}
	return token, nil
}
