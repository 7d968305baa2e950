package amplitude

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Credentials are an Amplitude project's API key and secret. Every way Go
// has of printing or logging a value shows them redacted, so a careless
// log line cannot leak them; only the export request's Authorization
// header and the sealed job file carry them.
type Credentials struct {
	APIKey    string
	APISecret string
}

const redacted = "[redacted]"

func (Credentials) String() string               { return redacted }
func (Credentials) GoString() string             { return redacted }
func (Credentials) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Credentials) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (c Credentials) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }
func (c Credentials) equal(o Credentials) bool {
	return c.APIKey == o.APIKey && c.APISecret == o.APISecret
}
func (c Credentials) fingerprint(jobID string) string { return fingerprint(jobID, c.APIKey) }

// fingerprint lets a new request with the same Amplitude project find a
// job that waits for credentials, without storing the key: a hash salted
// with the job id, so equal keys of two jobs do not look equal on disk.
func fingerprint(jobID, apiKey string) string {
	h := sha256.Sum256([]byte("tributary-amplitude-key\x00" + jobID + "\x00" + apiKey))
	return hex.EncodeToString(h[:12])
}

// KeySize is the length of a credential key: AES-256.
const KeySize = 32

// ParseKey reads a credential key given as 64 hex digits or as standard
// base64 of 32 bytes (e.g. `openssl rand -base64 32`).
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	return nil, fmt.Errorf("amplitude: a credential key must be %d bytes, as 64 hex digits or base64", KeySize)
}

var errUnseal = errors.New("amplitude: sealed credentials cannot be opened with this key")

// seal encrypts c with AES-256-GCM. The job id is additional data, so a
// sealed value copied into another job's file does not open.
func seal(key []byte, jobID string, c Credentials) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("amplitude: seal credentials: %w", err)
	}
	plain := binary.AppendUvarint(nil, uint64(len(c.APIKey)))
	plain = append(plain, c.APIKey...)
	plain = append(plain, c.APISecret...)
	out := aead.Seal(nonce, nonce, plain, []byte(jobID))
	clear(plain)
	return base64.StdEncoding.EncodeToString(out), nil
}

func unseal(key []byte, jobID, sealed string) (Credentials, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return Credentials{}, err
	}
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < aead.NonceSize() {
		return Credentials{}, errUnseal
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(jobID))
	if err != nil {
		return Credentials{}, errUnseal
	}
	n, k := binary.Uvarint(plain)
	if k <= 0 || uint64(len(plain)-k) < n {
		return Credentials{}, errUnseal
	}
	c := Credentials{APIKey: string(plain[k : k+int(n)]), APISecret: string(plain[k+int(n):])}
	clear(plain)
	return c, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("amplitude: a credential key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("amplitude: %w", err)
	}
	return cipher.NewGCM(block)
}
