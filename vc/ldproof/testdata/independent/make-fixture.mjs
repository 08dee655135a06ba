// Signs fixture.json: a KYA-OS DelegationCredential (VC Data Model 1.1)
// with an Ed25519Signature2020 proof made by Digital Bazaar's JavaScript
// libraries (@digitalbazaar/vc over jsonld-signatures, jsonld.js and
// rdf-canonize), an implementation independent of the Go verifier
// (aries-framework-go's verify data over json-gold).
//
// Deterministic: fixed key seeds, fixed dates, and Ed25519 signatures are
// deterministic, so a rerun writes the same bytes.
//
//   cd vc/ldproof/testdata/independent && npm ci && node make-fixture.mjs
//
// Nothing is fetched: the document loader serves the contexts from the npm
// packages (credentials v1, ed25519-2020) and the KYA delegation context
// from the repository's embedded copy (../../contexts/, see SOURCES.md
// there), and resolves did:key DIDs locally with the did:key driver.

import {readFileSync, writeFileSync} from 'node:fs';
import {createHash} from 'node:crypto';
import * as vc from '@digitalbazaar/vc';
import {contexts as credentialsContexts} from
  '@digitalbazaar/credentials-context';
import ed25519Context from 'ed25519-signature-2020-context';
import {Ed25519Signature2020} from '@digitalbazaar/ed25519-signature-2020';
import {Ed25519VerificationKey2020} from
  '@digitalbazaar/ed25519-verification-key-2020';
import {driver as didKeyDriver} from '@digitalbazaar/did-method-key';

const VC_V1 = 'https://www.w3.org/2018/credentials/v1';
const KYA =
  'https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0';
const ED25519_2020 = ed25519Context.constants.CONTEXT_URL;

const CREATED = '2026-01-01T00:00:00Z';
const AUDIENCE = 'did:web:mcp.example.com';

// Static contexts: never fetched.
const staticContexts = new Map([
  [VC_V1, credentialsContexts.get(VC_V1)],
  [ED25519_2020, ed25519Context.contexts.get(ED25519_2020)],
  [KYA, JSON.parse(readFileSync(
    new URL('../../contexts/kya-delegation-v1.0.0.jsonld', import.meta.url),
    'utf8'))]
]);
for(const [url, doc] of staticContexts) {
  if(!doc) {
    throw new Error(`context ${url} not found in its package`);
  }
}

const didKey = didKeyDriver();
didKey.use({
  multibaseMultikeyHeader: 'z6Mk',
  fromMultibase: Ed25519VerificationKey2020.from
});

async function documentLoader(url) {
  if(staticContexts.has(url)) {
    return {contextUrl: null, documentUrl: url,
      document: staticContexts.get(url)};
  }
  if(url.startsWith('did:key:')) {
    return {contextUrl: null, documentUrl: url,
      document: await didKey.get({url})};
  }
  throw new Error(`static document loader: refusing to load ${url}`);
}

// A fixed 32-byte seed from a label.
function seed(label) {
  return new Uint8Array(createHash('sha256').update(label).digest());
}

async function didKeyPair(label) {
  const key = await Ed25519VerificationKey2020.generate({seed: seed(label)});
  const did = `did:key:${key.fingerprint()}`;
  key.controller = did;
  key.id = `${did}#${key.fingerprint()}`;
  return {did, key};
}

const issuer = await didKeyPair('caddy-mcpi ldproof independent fixture: issuer');
const agent = await didKeyPair('caddy-mcpi ldproof independent fixture: agent');

const credential = {
  '@context': [VC_V1, KYA, ED25519_2020],
  id: 'urn:uuid:6a1d0000-0000-4000-8000-000000000001',
  type: ['VerifiableCredential', 'DelegationCredential'],
  issuer: issuer.did,
  issuanceDate: CREATED,
  expirationDate: '2027-01-01T00:00:00Z',
  credentialSubject: {
    id: agent.did,
    delegation: {
      id: 'urn:uuid:6a1d0000-0000-4000-8000-000000000002',
      issuerDid: issuer.did,
      subjectDid: agent.did,
      scopes: ['greeting:read', 'greeting:write'],
      constraints: {
        scopes: ['greeting:read', 'greeting:write'],
        audience: AUDIENCE,
        notAfter: 1798761600
      },
      status: 'active',
      createdAt: 1767225600000
    }
  }
};

const suite = new Ed25519Signature2020({key: issuer.key, date: CREATED});
const signed = await vc.issue({
  credential, suite, documentLoader, now: CREATED
});

// Check it with the same libraries before writing it.
const result = await vc.verifyCredential({
  credential: signed,
  suite: new Ed25519Signature2020(),
  documentLoader,
  now: new Date('2026-06-01T00:00:00Z'),
  checkStatus: async () => ({verified: true})
});
if(!result.verified) {
  console.error(JSON.stringify(result, null, 2));
  throw new Error('the signed credential does not verify');
}

writeFileSync(new URL('./fixture.json', import.meta.url),
  JSON.stringify(signed, null, 2) + '\n');
console.log(`fixture.json: issuer ${issuer.did}, verificationMethod ` +
  `${signed.proof.verificationMethod}`);
