// Keys, signatures and PKCE for the OIDC sign-in scenario (tests/tests/oidc_login.rs),
// run by tests/src/oidc.rs. Node's own crypto only (no package needed).
//
//   echo '{"op": ...}' | node sign.mjs      -> one JSON line on stdout
//
// ops:
//   {"op": "keygen", "kid": "k1"}
//       -> a private RSA-2048 JWK {kty, n, e, d, p, q, dp, dq, qi, kid, alg: "RS256", use: "sig"}
//   {"op": "public", "jwk": JWK}
//       -> {"jwk": the public JWK, "pem": its SPKI PEM}
//   {"op": "sign", "alg": "RS256", "jwk": JWK, "header": {...}, "claims": {...}}
//       -> {"token": compact JWS}; the header gets alg (and the JWK's kid unless given)
//   {"op": "sign", "alg": "HS256", "secret": "text", "header": {...}, "claims": {...}}
//       -> {"token": ...} HMAC-SHA256 with the secret's UTF-8 bytes
//   {"op": "sign", "alg": "HS256-public-pem", "jwk": JWK, ...}
//       -> HS256 keyed with the JWK's public key as SPKI PEM text (the
//          algorithm-confusion attack); the header says alg HS256
//   {"op": "sign", "alg": "none", "header": {...}, "claims": {...}}
//       -> an unsigned token `header.payload.`
//   {"op": "pkce"}
//       -> {"verifier": ..., "challenge": BASE64URL(SHA-256(verifier))}
//   {"op": "sha256_b64url", "text": "..."} -> {"digest": ...}

import crypto from 'node:crypto';

const b64url = (buf) => Buffer.from(buf).toString('base64url');
const part = (obj) => b64url(JSON.stringify(obj));

function publicOf(jwk) {
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  const pub = key.export({ format: 'jwk' });
  for (const f of ['kid', 'alg', 'use']) {
    if (jwk[f] !== undefined) pub[f] = jwk[f];
  }
  return { jwk: pub, pem: key.export({ type: 'spki', format: 'pem' }) };
}

function sign(req) {
  const header = { ...(req.header ?? {}) };
  const claims = req.claims ?? {};
  switch (req.alg) {
    case 'RS256': {
      header.alg ??= 'RS256';
      if (header.kid === undefined && req.jwk.kid !== undefined) header.kid = req.jwk.kid;
      header.typ ??= 'JWT';
      const input = `${part(header)}.${part(claims)}`;
      const key = crypto.createPrivateKey({ key: req.jwk, format: 'jwk' });
      return `${input}.${b64url(crypto.sign('sha256', Buffer.from(input), key))}`;
    }
    case 'HS256':
    case 'HS256-public-pem': {
      header.alg ??= 'HS256';
      header.typ ??= 'JWT';
      if (req.alg === 'HS256-public-pem' && header.kid === undefined && req.jwk.kid !== undefined) header.kid = req.jwk.kid;
      const secret = req.alg === 'HS256' ? req.secret : publicOf(req.jwk).pem;
      const input = `${part(header)}.${part(claims)}`;
      return `${input}.${b64url(crypto.createHmac('sha256', secret).update(input).digest())}`;
    }
    case 'none':
      header.alg ??= 'none';
      return `${part(header)}.${part(claims)}.`;
    default:
      throw new Error(`unknown alg ${req.alg}`);
  }
}

function run(req) {
  switch (req.op) {
    case 'keygen': {
      const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
      return { ...privateKey.export({ format: 'jwk' }), kid: req.kid, alg: 'RS256', use: 'sig' };
    }
    case 'public':
      return publicOf(req.jwk);
    case 'sign':
      return { token: sign(req) };
    case 'pkce': {
      const verifier = b64url(crypto.randomBytes(32));
      return { verifier, challenge: b64url(crypto.createHash('sha256').update(verifier).digest()) };
    }
    case 'sha256_b64url':
      return { digest: b64url(crypto.createHash('sha256').update(req.text).digest()) };
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  try {
    process.stdout.write(`${JSON.stringify(run(JSON.parse(input)))}\n`);
  } catch (err) {
    console.error(`sign.mjs: ${err.stack ?? err}`);
    process.exit(1);
  }
});
