package sfserver

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// verifyJWT checks a key-pair login token as Snowflake does: the user is
// named by the subject ACCOUNT.USER (the login request carries no user
// name), the RS256 signature must verify with that user's registered
// key, the issuer must name the key's SHA-256 fingerprint, and the token
// must be within its validity window. It returns the user.
func verifyJWT(tok, account string, keyOf func(user string) *rsa.PublicKey) (string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", errors.New("malformed token")
	}
	var claims struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return "", err
	}
	user, found := strings.CutPrefix(claims.Sub, account+".")
	pub := keyOf(user)
	if !found || pub == nil {
		return "", fmt.Errorf("no key registered for subject %q", claims.Sub)
	}
	return user, verifySigned(parts, claims.Iss, claims.Sub, claims.Iat, claims.Exp, pub)
}

func verifySigned(parts []string, iss, subject string, iat, exp int64, pub *rsa.PublicKey) error {
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return err
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("algorithm %q", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	fp := sha256.Sum256(der)
	if want := subject + ".SHA256:" + base64.StdEncoding.EncodeToString(fp[:]); iss != want {
		return fmt.Errorf("issuer %q, want %q", iss, want)
	}
	now := time.Now().Unix()
	if exp < now || iat > now+60 {
		return errors.New("token not valid now")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return json.Unmarshal(b, v)
}
