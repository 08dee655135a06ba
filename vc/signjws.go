package vc

import "crypto"

// SignJWS signs a JWS signing input with key (Ed25519, P-256 or
// secp256k1) and returns the algorithm that names it and the signature
// (R||S for ECDSA), for the other signers of the project (KYA-OS proofs).
func SignJWS(key crypto.PrivateKey, input []byte) (alg string, sig []byte, err error) {
	if alg, err = algForPrivateKey(key); err != nil {
		return "", nil, err
	}
	sig, err = signJWS(key, input)
	return alg, sig, err
}
