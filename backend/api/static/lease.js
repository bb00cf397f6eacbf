// A lease's hand-over in the page, in protocol/lease_access.py's format: the SSH key check, the
// EIP-712 typed data the wallet signs (LeaseKey) and the digest of the provider's LeaseAccess,
// which the page compares with the one the provider confirmed on-chain (LeaseManager.deliveryOf).
"use strict";
const lease = (() => {
  const MAX_SSH_KEY_BYTES = 8192;
  const SSH_KEY = new RegExp("^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\\.com" +
    "|sk-ecdsa-sha2-nistp256@openssh\\.com) [A-Za-z0-9+/]+={0,3}( [\\x21-\\x7e][\\x20-\\x7e]*)?$");
  const TYPES = {
    EIP712Domain: [{ name: "name", type: "string" }, { name: "version", type: "string" },
                   { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" }],
    LeaseKey: [{ name: "leaseId", type: "uint256" }, { name: "sshPublicKey", type: "string" }, { name: "image", type: "bytes32" }],
    LeaseAccess: [{ name: "leaseId", type: "uint256" }, { name: "host", type: "string" }, { name: "port", type: "uint16" },
                  { name: "user", type: "string" }, { name: "hostKeyFingerprint", type: "string" }],
  };
  const utf8 = (s) => new TextEncoder().encode(s);
  const NO_IMAGE = "0x" + "00".repeat(32);  // the lease boots the provider's default root file system

  // Port of normalize_ssh_key: the one-line public key, or an error saying what to give instead.
  function normalizeSshKey(text) {
    const line = String(text).trim();
    if (utf8(line).length > MAX_SSH_KEY_BYTES) throw new Error(`SSH public key: longer than ${MAX_SSH_KEY_BYTES} bytes`);
    if (line.includes("PRIVATE KEY")) throw new Error("SSH public key: this is a private key; give the .pub file");
    if (!SSH_KEY.test(line)) {
      throw new Error("SSH public key: expected one line 'TYPE BASE64 [comment]' " +
                      "(e.g. ~/.ssh/id_ed25519.pub from `ssh-keygen -t ed25519`)");
    }
    return line;
  }

  const domain = (chainId, leaseManager) => ({ name: "Unchained LeaseManager", version: "1", chainId, verifyingContract: leaseManager });
  // What eth_signTypedData_v4 takes (the same document protocol.lease_access._typed builds).
  const typedData = (primaryType, dom, message) =>
    ({ types: { EIP712Domain: TYPES.EIP712Domain, [primaryType]: TYPES[primaryType] }, primaryType, domain: dom, message });

  function hashStruct(type, value) {
    const fields = TYPES[type];
    const encodeType = `${type}(${fields.map((f) => `${f.type} ${f.name}`).join(",")})`;
    const words = [keccak256(utf8(encodeType))];
    for (const f of fields) {
      const v = value[f.name];
      words.push(f.type === "string" ? keccak256(utf8(v)) : merkle.hexToBytes(eth.word(v)));
    }
    const out = new Uint8Array(32 * words.length);
    words.forEach((w, i) => out.set(w, 32 * i));
    return keccak256(out);
  }
  // The EIP-712 digest, as protocol.lease_access.typed_hash computes it.
  function typedHash(data) {
    const out = new Uint8Array(66);
    out.set([0x19, 0x01]);
    out.set(hashStruct("EIP712Domain", data.domain), 2);
    out.set(hashStruct(data.primaryType, data.message), 34);
    return merkle.bytesToHex(keccak256(out));
  }
  const sshCommand = (access) => `ssh -p ${access.port} ${access.user}@${access.host}`;
  return { NO_IMAGE, normalizeSshKey, domain, typedData, typedHash, sshCommand };
})();
