// Identifiers: world identifiers and object ids, as the wire protocol forms them.
// Part of solipsism.js, which re-exports its public API.

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

function randomAlnum(n) {
  const out = [];
  const buf = new Uint8Array(n * 2);
  while (out.length < n) {
    crypto.getRandomValues(buf);
    for (const b of buf) {
      if (b < 248 && out.length < n) out.push(ALNUM[b % 62]); // 248 = 4*62: unbiased
    }
  }
  return out.join("");
}

/** @returns {string} a fresh object id of the form XXXXXXXX-XXXXXXXX. */
export function newObjectId() {
  return randomAlnum(8) + "-" + randomAlnum(8);
}

/**
 * @param {string} prefix what kind of world this is: client, webworker, ...
 * @returns {string} a fresh world identifier prefix-XXXXXXXX-XXXXXXXX.
 */
export function newIdentifier(prefix = "client") {
  return prefix + "-" + newObjectId();
}
