// Package sealed encrypts secrets kept at rest (the passwords of
// connections created through the app API) with AES-256-GCM under a key
// from the operator's environment. A sealed value names what it belongs
// to (the additional data), so one cannot be moved to another record.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the key length: AES-256.
const KeySize = 32

const prefix = "v1:"

// ErrOpen is the error of a value that does not open under the key: the
// wrong key, a changed value or one sealed for another record.
var ErrOpen = errors.New("sealed value does not open with this key")

// ParseKey reads a key written as 64 hex digits or 32 bytes of standard
// base64.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if k, err := hex.DecodeString(s); err == nil && len(k) == KeySize {
		return k, nil
	}
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) == KeySize {
		return k, nil
	}
	return nil, fmt.Errorf("must be %d random bytes as 64 hex digits or base64 (e.g. openssl rand -hex 32)", KeySize)
}

// Seal encrypts plain for the record named by aad.
func Seal(key []byte, aad, plain string) (string, error) {
	g, err := gcm(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("sealed: %w", err)
	}
	out := g.Seal(nonce, nonce, []byte(plain), []byte(aad))
	return prefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value Seal made for the same aad under the same key.
func Open(key []byte, aad, sealed string) (string, error) {
	g, err := gcm(key)
	if err != nil {
		return "", err
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sealed, prefix))
	if !strings.HasPrefix(sealed, prefix) || err != nil || len(raw) < g.NonceSize() {
		return "", ErrOpen
	}
	plain, err := g.Open(nil, raw[:g.NonceSize()], raw[g.NonceSize():], []byte(aad))
	if err != nil {
		return "", ErrOpen
	}
	return string(plain), nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sealed: the key must be %d bytes", KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealed: %w", err)
	}
	return cipher.NewGCM(b)
}
